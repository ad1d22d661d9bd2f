"""``executor.json``: which CI run made the results (Jenkins, GitLab CI, or by hand).

Allure shows it on the overview and uses ``buildOrder`` to order the trend.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _int(value: str | None, default: int) -> int:
    return int(value) if value and value.isdigit() else default


def executor(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The executor record from CI variables in ``env`` (default: ``os.environ``).

    Outside Jenkins and GitLab, ``HIL_BUILD_ORDER`` (set by ci/nightly) numbers the run.
    """
    env = os.environ if env is None else env
    build_order = _int(env.get("HIL_BUILD_ORDER"), 0)
    if env.get("JENKINS_URL"):
        return {
            "name": "Jenkins",
            "type": "jenkins",
            "url": env["JENKINS_URL"],
            "buildOrder": _int(env.get("BUILD_NUMBER"), build_order),
            "buildName": env.get("BUILD_DISPLAY_NAME") or env.get("BUILD_TAG", ""),
            "buildUrl": env.get("BUILD_URL", ""),
            "reportUrl": env.get("BUILD_URL", "").rstrip("/") + "/allure"
            if env.get("BUILD_URL")
            else "",
            "reportName": f"{env.get('JOB_NAME', 'hil')} allure report",
        }
    if env.get("GITLAB_CI"):
        return {
            "name": "GitLab CI",
            "type": "gitlab",
            "url": env.get("CI_SERVER_URL", ""),
            "buildOrder": _int(
                env.get("CI_PIPELINE_IID") or env.get("CI_PIPELINE_ID"), build_order
            ),
            "buildName": f"{env.get('CI_PROJECT_PATH', 'hil')} #{env.get('CI_PIPELINE_ID', '')}"
            f" {env.get('CI_JOB_NAME', '')}".rstrip(),
            "buildUrl": env.get("CI_JOB_URL") or env.get("CI_PIPELINE_URL", ""),
            "reportUrl": env.get("CI_JOB_URL", "").rstrip("/") + "/artifacts/browse"
            if env.get("CI_JOB_URL")
            else "",
            "reportName": f"{env.get('CI_PROJECT_NAME', 'hil')} allure report",
        }
    return {
        "name": f"hil on {socket.gethostname()}",
        "type": "local",
        "buildOrder": build_order,
        "buildName": f"local run #{build_order}",
    }


def write_executor(alluredir: Path, env: Mapping[str, str] | None = None) -> Path:
    """Write ``executor.json`` into the results directory."""
    path = alluredir / "executor.json"
    path.write_text(json.dumps(executor(env), indent=1))
    return path
