"""Kernel log lines as the 6.1 and 6.12 printks log them, for the kernel-log tests.

Each line is written as its printk prints it (format string filled in; pr_fmt
prefix included; the timestamp is not part of a /dev/kmsg message), and names
the file and function it comes from.  The same format in both kernels unless
the source says otherwise.
"""

from __future__ import annotations

import pytest

# Report lines that fail the kernel-log check.
REPORTS = [
    # 6.1 arch/x86/kernel/traps.c exc_general_protection (GPFSTR ", %s 0x%lx") through
    # die_addr to arch/x86/kernel/dumpstack.c __die_header "%s: %04lx [#%d]%s%s%s%s%s";
    # 6.1 has no "Oops: " prefix (6.12's __die_header has).
    pytest.param(
        "general protection fault, probably for non-canonical address 0xdead000000000122: "
        "0000 [#1] PREEMPT SMP NOPTI",
        id="gpf-6.1-non-canonical",
    ),
    pytest.param("general protection fault: 0000 [#1] PREEMPT SMP NOPTI", id="gpf-6.1"),
    # lib/ubsan.c ubsan_prologue: "UBSAN: %s in %s:%d:%d"
    pytest.param(
        "UBSAN: array-index-out-of-bounds in drivers/infiniband/sw/siw/siw_qp.c:123:4", id="ubsan"
    ),
    # kernel/rcu/tree_stall.h print_cpu_stall: "INFO: %s self-detected stall on CPU",
    # with kernel/rcu/tree.c's pr_fmt "rcu: "
    pytest.param("rcu: INFO: rcu_preempt self-detected stall on CPU", id="rcu-self-detected"),
    # kernel/rcu/tree_stall.h print_other_cpu_stall: "INFO: %s detected stalls on CPUs/tasks:"
    pytest.param("rcu: INFO: rcu_sched detected stalls on CPUs/tasks:", id="rcu-other-cpus"),
    # kernel/rcu/tree_exp.h synchronize_rcu_expedited_wait: "INFO: %s detected expedited
    # stalls on CPUs/tasks: {", its pr_cont " %d-%c%c%c%c" and " } %lu jiffies s: %lu root: %#lx/%c"
    pytest.param(
        "rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-...D } "
        "21002 jiffies s: 1185 root: 0x2/.",
        id="rcu-expedited",
    ),
    # 6.12 kernel/workqueue.c wq_cpu_intensive_report (6.5+, CONFIG_WQ_CPU_INTENSIVE_REPORT):
    # "workqueue: %ps hogged CPU for >%luus %llu times, consider switching to WQ_UNBOUND"
    pytest.param(
        "workqueue: siw_cm_work_handler [siw] hogged CPU for >10000us 4 times, "
        "consider switching to WQ_UNBOUND",
        id="workqueue-hogged-cpu",
    ),
    # kernel/hung_task.c check_hung_task: "INFO: task %s:%d blocked for more than %ld seconds."
    pytest.param("INFO: task kworker/0:1:123 blocked for more than 120 seconds.", id="hung-task"),
]

# Report lines the check failed on before these patterns (kept as they were).
STILL_REPORTS = [
    # kernel/panic.c __warn: "WARNING: CPU: %d PID: %d at %s:%d %pS"
    pytest.param(
        "WARNING: CPU: 0 PID: 1 at net/core/dev.c:1234 netdev_run_todo+0x12/0x34", id="warn"
    ),
    # kernel/locking/lockdep.c print_circular_bug_header
    pytest.param("WARNING: possible circular locking dependency detected", id="lockdep-circular"),
    # kernel/workqueue.c wq_watchdog_timer_fn: "BUG: workqueue lockup - pool", pr_cont_pool_info
    # " cpus=%*pbl", " node=%d", " flags=0x%x nice=%d", then " stuck for %us!"
    pytest.param(
        "BUG: workqueue lockup - pool cpus=0 node=0 flags=0x0 nice=0 stuck for 31s!",
        id="workqueue-lockup",
    ),
    # the 6.1 GPF header on a KASAN kernel: caught by its " KASAN" flag
    pytest.param(
        "general protection fault, probably for non-canonical address 0xdffffc0000000003: "
        "0000 [#1] PREEMPT SMP KASAN NOPTI",
        id="gpf-6.1-kasan",
    ),
]

# Lines that look like them but report nothing.
HARMLESS = [
    # kernel/workqueue.c show_one_workqueue (pr_info) and wq_numa_init (pr_info)
    pytest.param("workqueue events: flags=0x0", id="workqueue-flags"),
    pytest.param("workqueue: NUMA affinity support disabled", id="workqueue-info"),
    # kernel/rcu/update.c rcupdate_announce_bootup_oddness (pr_info, no pr_fmt)
    pytest.param(
        "\tRCU CPU stall warnings timeout set to 21 (rcu_cpu_stall_timeout).", id="rcu-stall-info"
    ),
    # kernel/rcu/tree_plugin.h rcu_bootup_announce (pr_info)
    pytest.param("rcu: Preemptible hierarchical RCU implementation.", id="rcu-info"),
    # mm/percpu.c pcpu_alloc (pr_info, pr_fmt KBUILD_MODNAME ": ")
    pytest.param("percpu: limit reached, disable warning", id="lower-case-warning"),
]
