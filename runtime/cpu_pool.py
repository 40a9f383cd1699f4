"""The CPU thread pool that runs ``parallel`` loops, as LLVM IR text (runtime/cpu.py JITs it).

Why our own pool: a loop split statically into one range per thread waits for its slowest thread,
and when another process occupies a core that thread runs a scheduler tick (4 ms) later, every
region (issue 17: a 0.25 ms kernel took 12 ms; libgomp's ``GOMP_parallel`` also ends in a barrier
that waits for every thread of the team, started or not). Here:

- each of the ``n`` participants (the calling thread is participant 0) owns a contiguous range of
  the iterations, the same split as a static schedule, so a quiet machine runs as before;
- the owner takes its range from the front in halves (its first claim is half its range, then a
  quarter, ...: ``log2`` claims, each one compare-and-swap on a cache line of its own);
- a participant whose range is done steals the back half of what another has not claimed yet;
- the caller waits only for iterations that someone has claimed, never for a thread that has not
  started: a worker that wakes late finds nothing left and goes back to waiting.

A slot is one ``i64``: ``tag << 32 | front << 16 | end`` where ``tag`` is the region's generation
(so a worker that wakes late and still holds an older region's view can never claim in the new
one) and ``front``/``end`` count *units* of ``scale`` iterations (at most 65535 units; a longer
loop is cut into units of ``ceil(extent / 65535)`` iterations).

Waiting: a worker spins on the generation word for ``WORKER_SPIN`` pause instructions after a
region (~0.5 ms on a Zen 4: back-to-back kernels of a network find it awake), calling
``sched_yield()`` every ``YIELD_EVERY`` pauses (on a quiet core that returns at once; on a core
shared with another process it hands the core over instead of burning the slice), then sleeps on
a futex; the caller spins ``CALLER_SPIN`` pauses for the claimed chunks still running, then
sleeps on a futex too. Measured on the shared 2-core machine (load 5-7): spin 0, 20000 and
200000 pauses, with and without yielding, gave the same kernel times within its noise, both
quiet and beside a busy process; the choice keeps the wake-up latency of a spinning worker
for a quiet machine and gives way on a busy one.

The entry points (C ABI):

- ``void autosched_parallel_for(ptr task, ptr closure, i64 extent)``: runs
  ``task(closure, begin, end)`` over disjoint ranges covering ``[0, extent)``; returns when all
  are done. A second caller while a region runs (another Python thread) runs its loop serially.
- ``void autosched_parallel_launch(ptr task, ptr closure, i32 max_tasks)``: the older ABI
  (``task(closure, task_id, num_tasks)`` once per task), kept for object code built before.
- ``void autosched_pool_worker(i32 index)``: a worker's loop (index >= 1), run by a Python thread
  through ctypes (which releases the GIL); returns after ``autosched_pool_shutdown()`` (at exit;
  parallel loops then run serially in their caller).
- ``void autosched_pool_reset()``: forget the workers (in a child after ``fork()``).
"""

from __future__ import annotations

import platform
import sys

MAX_THREADS = 256  # slots; more threads than this are capped
MAX_UNITS = 65535
WORKER_SPIN = 20000  # pause instructions (~0.3-0.6 ms) before a worker sleeps
CALLER_SPIN = 20000  # and before the caller sleeps on the chunks others still run
YIELD_EVERY = 16  # a power of 2 (0: never): a spinning worker calls sched_yield() this often

# syscall numbers of futex, and the pause instruction, per machine
_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}
_X86_PAUSE = ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()")
_ARM_YIELD = ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)")
_PAUSE = {"x86_64": _X86_PAUSE, "amd64": _X86_PAUSE, "aarch64": _ARM_YIELD, "arm64": _ARM_YIELD}


def supported() -> bool:
    """Whether this platform has the futex system call the pool sleeps on (Linux x86-64/arm64)."""
    return sys.platform.startswith("linux") and platform.machine().lower() in _FUTEX


def pool_ir() -> str:
    """The pool's LLVM IR for this machine (see the module docstring)."""
    machine = platform.machine().lower()
    return _IR.format(
        SYS_FUTEX=_FUTEX[machine],
        PAUSE_DECL=_PAUSE[machine][0],
        PAUSE=_PAUSE[machine][1],
        MAX=MAX_THREADS,
        MAX_UNITS=MAX_UNITS,
        MAX_UNITS_MINUS_1=MAX_UNITS - 1,
        WORKER_SPIN=WORKER_SPIN,
        YIELD_MASK=max(YIELD_EVERY, 1) - 1,
        YIELD_AT=0 if YIELD_EVERY else 1,  # never equal to a masked value of 0 when off
        CALLER_SPIN=CALLER_SPIN,
        CLAIM_FUNCTIONS=_OWNER_CLAIM + "\n" + _THIEF_CLAIM,
    )


def _claim_function(comment: str, name: str, take: str, result: str) -> str:
    """A lock-free claim on a slot ``tag << 32 | front << 16 | end``: read it, and while it
    belongs to region ``tag`` and is not empty, compare-and-swap in what ``take`` leaves there;
    return the claimed range as ``a << 32 | b`` (``result``), or -1 when nothing is left."""
    return f"""; {comment}
define internal i64 @{name}(ptr %slot, i64 %tag) {{
entry:
  br label %loop
loop:
  %x = load atomic i64, ptr %slot monotonic, align 8
  %xtag = lshr i64 %x, 32
  %fsh = lshr i64 %x, 16
  %f = and i64 %fsh, 65535
  %e = and i64 %x, 65535
  %same = icmp eq i64 %xtag, %tag
  %left = icmp ult i64 %f, %e
  %go = and i1 %same, %left
  br i1 %go, label %try, label %none
try:
  %len = sub i64 %e, %f
{take}
  %r = cmpxchg ptr %slot, i64 %x, i64 %new seq_cst seq_cst
  %ok = extractvalue {{ i64, i1 }} %r, 1
  br i1 %ok, label %got, label %loop
got:
{result}
none:
  ret i64 -1
}}
"""


# The owner takes from the front of its slot and thieves from the back, so the two meet in the
# middle and no unit is claimed twice.
_OWNER_CLAIM = _claim_function(
    "The owner's claim: the front half (rounded up) of what is left in its slot; "
    "a << 32 | b, or -1.",
    "claim",
    take="""  %len1 = add i64 %len, 1
  %half = lshr i64 %len1, 1
  %nf = add i64 %f, %half
  %new = call i64 @pack(i64 %tag, i64 %nf, i64 %e)""",
    result="""  %fa = shl i64 %f, 32
  %res = or i64 %fa, %nf
  ret i64 %res""",
)
_THIEF_CLAIM = _claim_function(
    "A thief's claim: the back half (rounded up) of what is left in a victim's slot; or -1.",
    "steal",
    take="""  %keep = lshr i64 %len, 1
  %mid = add i64 %f, %keep
  %new = call i64 @pack(i64 %tag, i64 %f, i64 %mid)""",
    result="""  %ma = shl i64 %mid, 32
  %res = or i64 %ma, %e
  ret i64 %res""",
)


_IR = r"""
@autosched_num_threads = global i32 1, align 64
@as_ready = global i32 0, align 64
@as_busy = global i32 0, align 64
@as_gen = global i32 0, align 64
@as_sleepers = global i32 0, align 64
@as_shutdown = global i32 0, align 64
@as_caller_waiting = global i32 0, align 64
@as_remaining = global i32 0, align 64
@as_fn = global ptr null, align 64
@as_closure = global ptr null, align 8
@as_extent = global i64 0, align 8
@as_scale = global i64 1, align 8
@as_n = global i32 0, align 8
@as_slots = global [{MAX} x [8 x i64]] zeroinitializer, align 64

declare i64 @syscall(i64, ...)
declare i32 @sched_yield()
{PAUSE_DECL}

define internal void @pause() alwaysinline {{
  {PAUSE}
  ret void
}}

define internal void @futex_wait(ptr %addr, i32 %val) {{
  %v = zext i32 %val to i64
  %r = call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %addr, i64 128, i64 %v,
                                    ptr null, ptr null, i64 0)
  ret void
}}

define internal void @futex_wake(ptr %addr, i32 %count) {{
  %c = zext i32 %count to i64
  %r = call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %addr, i64 129, i64 %c,
                                    ptr null, ptr null, i64 0)
  ret void
}}

define internal ptr @slot(i32 %t) {{
  %t64 = zext i32 %t to i64
  %p = getelementptr inbounds [{MAX} x [8 x i64]], ptr @as_slots, i64 0, i64 %t64, i64 0
  ret ptr %p
}}

define internal i64 @pack(i64 %tag, i64 %f, i64 %e) {{
  %t = shl i64 %tag, 32
  %fs = shl i64 %f, 16
  %a = or i64 %t, %fs
  %r = or i64 %a, %e
  ret i64 %r
}}

; Run units [a, b) and count them done; the last one wakes a sleeping caller.
define internal void @exec(ptr %fn, ptr %cl, i64 %scale, i64 %extent, i64 %a, i64 %b) {{
entry:
  %lo = mul i64 %a, %scale
  %hi0 = mul i64 %b, %scale
  %less = icmp slt i64 %hi0, %extent
  %hi = select i1 %less, i64 %hi0, i64 %extent
  call void %fn(ptr %cl, i64 %lo, i64 %hi)
  %cnt64 = sub i64 %b, %a
  %cnt = trunc i64 %cnt64 to i32
  %old = atomicrmw sub ptr @as_remaining, i32 %cnt seq_cst
  %last = icmp eq i32 %old, %cnt
  br i1 %last, label %check, label %done
check:
  %w = load atomic i32, ptr @as_caller_waiting seq_cst, align 4
  %sleeping = icmp ne i32 %w, 0
  br i1 %sleeping, label %wake, label %done
wake:
  call void @futex_wake(ptr @as_remaining, i32 1)
  br label %done
done:
  ret void
}}

{CLAIM_FUNCTIONS}
; One participant of region %tag32: its own slot, then stealing until nothing is left to claim.
define internal void @participate(i32 %self, i32 %tag32) {{
entry:
  %fn = load atomic ptr, ptr @as_fn monotonic, align 8
  %cl = load atomic ptr, ptr @as_closure monotonic, align 8
  %extent = load atomic i64, ptr @as_extent monotonic, align 8
  %scale = load atomic i64, ptr @as_scale monotonic, align 8
  %n = load atomic i32, ptr @as_n monotonic, align 4
  %tag = zext i32 %tag32 to i64
  %mine = call ptr @slot(i32 %self)
  %member = icmp ult i32 %self, %n
  br i1 %member, label %own, label %out
own:
  %r = call i64 @claim(ptr %mine, i64 %tag)
  %none = icmp eq i64 %r, -1
  br i1 %none, label %steal_start, label %run
run:
  %a = lshr i64 %r, 32
  %b = and i64 %r, 4294967295
  call void @exec(ptr %fn, ptr %cl, i64 %scale, i64 %extent, i64 %a, i64 %b)
  br label %own
steal_start:
  br label %steal_loop
steal_loop:
  %k = phi i32 [ 1, %steal_start ], [ %k1, %next ]
  %more = icmp ult i32 %k, %n
  br i1 %more, label %try, label %out
try:
  %sum = add i32 %self, %k
  %v = urem i32 %sum, %n
  %vs = call ptr @slot(i32 %v)
  %s = call i64 @steal(ptr %vs, i64 %tag)
  %failed = icmp eq i64 %s, -1
  br i1 %failed, label %next, label %stolen
next:
  %k1 = add i32 %k, 1
  br label %steal_loop
stolen:
  %sa = lshr i64 %s, 32
  %sb = and i64 %s, 4294967295
  %packed = call i64 @pack(i64 %tag, i64 %sa, i64 %sb)
  store atomic i64 %packed, ptr %mine seq_cst, align 8
  br label %own
out:
  ret void
}}

define void @autosched_parallel_for(ptr %fn, ptr %cl, i64 %extent) {{
entry:
  %nt = load atomic i32, ptr @autosched_num_threads monotonic, align 4
  %ready = load atomic i32, ptr @as_ready monotonic, align 4
  %avail = add i32 %ready, 1
  %fewer = icmp slt i32 %avail, %nt
  %n0 = select i1 %fewer, i32 %avail, i32 %nt
  %capmax = icmp sgt i32 %n0, {MAX}
  %n1 = select i1 %capmax, i32 {MAX}, i32 %n0
  %n1w = sext i32 %n1 to i64
  %short = icmp slt i64 %extent, %n1w
  %n2w = select i1 %short, i64 %extent, i64 %n1w
  %single = icmp sle i64 %n2w, 1
  br i1 %single, label %serial, label %lock
serial:
  call void %fn(ptr %cl, i64 0, i64 %extent)
  ret void
lock:
  %cx = cmpxchg ptr @as_busy, i32 0, i32 1 acquire monotonic
  %locked = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %locked, label %setup, label %serial
setup:
  %big = icmp sgt i64 %extent, {MAX_UNITS}
  %ext_up = add i64 %extent, {MAX_UNITS_MINUS_1}
  %sc = udiv i64 %ext_up, {MAX_UNITS}
  %scale = select i1 %big, i64 %sc, i64 1
  %scm1 = sub i64 %scale, 1
  %eu = add i64 %extent, %scm1
  %units = udiv i64 %eu, %scale
  %n = trunc i64 %n2w to i32
  store atomic ptr %fn, ptr @as_fn monotonic, align 8
  store atomic ptr %cl, ptr @as_closure monotonic, align 8
  store atomic i64 %extent, ptr @as_extent monotonic, align 8
  store atomic i64 %scale, ptr @as_scale monotonic, align 8
  store atomic i32 %n, ptr @as_n monotonic, align 4
  %units32 = trunc i64 %units to i32
  store atomic i32 %units32, ptr @as_remaining monotonic, align 4
  %g0 = load atomic i32, ptr @as_gen monotonic, align 4
  %g = add i32 %g0, 1
  %tag = zext i32 %g to i64
  br label %fill
fill:
  %t = phi i64 [ 0, %setup ], [ %t1, %fill ]
  %t1 = add i64 %t, 1
  %lo_n = mul i64 %t, %units
  %lo = udiv i64 %lo_n, %n2w
  %hi_n = mul i64 %t1, %units
  %hi = udiv i64 %hi_n, %n2w
  %packed = call i64 @pack(i64 %tag, i64 %lo, i64 %hi)
  %t32 = trunc i64 %t to i32
  %sp = call ptr @slot(i32 %t32)
  store atomic i64 %packed, ptr %sp monotonic, align 8
  %filled = icmp eq i64 %t1, %n2w
  br i1 %filled, label %publish, label %fill
publish:
  store atomic i32 %g, ptr @as_gen seq_cst, align 4
  %sl = load atomic i32, ptr @as_sleepers seq_cst, align 4
  %anyone = icmp ne i32 %sl, 0
  br i1 %anyone, label %wake, label %work
wake:
  call void @futex_wake(ptr @as_gen, i32 2147483647)
  br label %work
work:
  call void @participate(i32 0, i32 %g)
  br label %spin
spin:
  %i = phi i32 [ 0, %work ], [ %i1, %spin_more ]
  %rem = load atomic i32, ptr @as_remaining acquire, align 4
  %finished = icmp eq i32 %rem, 0
  br i1 %finished, label %done, label %spin_more_check
spin_more_check:
  %i1 = add i32 %i, 1
  %keep_spinning = icmp ult i32 %i1, {CALLER_SPIN}
  br i1 %keep_spinning, label %spin_more, label %block
spin_more:
  call void @pause()
  br label %spin
block:
  store atomic i32 1, ptr @as_caller_waiting seq_cst, align 4
  br label %block_loop
block_loop:
  %rem2 = load atomic i32, ptr @as_remaining seq_cst, align 4
  %finished2 = icmp eq i32 %rem2, 0
  br i1 %finished2, label %unblock, label %sleep
sleep:
  call void @futex_wait(ptr @as_remaining, i32 %rem2)
  br label %block_loop
unblock:
  store atomic i32 0, ptr @as_caller_waiting seq_cst, align 4
  br label %done
done:
  store atomic i32 0, ptr @as_busy release, align 4
  ret void
}}

define void @autosched_pool_worker(i32 %self) {{
entry:
  %r0 = atomicrmw add ptr @as_ready, i32 1 seq_cst
  %g0 = load atomic i32, ptr @as_gen acquire, align 4
  br label %wait
wait:
  %mine = phi i32 [ %g0, %entry ], [ %g, %work ]
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i1, %relax ], [ %i1, %yield ], [ {WORKER_SPIN}, %woke ]
  %g = load atomic i32, ptr @as_gen acquire, align 4
  %new = icmp ne i32 %g, %mine
  br i1 %new, label %work, label %idle
idle:
  %sd = load atomic i32, ptr @as_shutdown monotonic, align 4
  %stop = icmp ne i32 %sd, 0
  br i1 %stop, label %exit, label %count
count:
  %more = icmp ult i32 %i, {WORKER_SPIN}
  br i1 %more, label %relax, label %sleep
relax:
  call void @pause()
  %i1 = add i32 %i, 1
  %phase = and i32 %i1, {YIELD_MASK}
  %give = icmp eq i32 %phase, {YIELD_AT}
  br i1 %give, label %yield, label %spin
yield:
  %y = call i32 @sched_yield()
  br label %spin
sleep:
  %s0 = atomicrmw add ptr @as_sleepers, i32 1 seq_cst
  %g2 = load atomic i32, ptr @as_gen seq_cst, align 4
  %sd2 = load atomic i32, ptr @as_shutdown seq_cst, align 4
  %same = icmp eq i32 %g2, %mine
  %running = icmp eq i32 %sd2, 0
  %both = and i1 %same, %running
  br i1 %both, label %futex, label %woke
futex:
  call void @futex_wait(ptr @as_gen, i32 %mine)
  br label %woke
woke:
  %s1 = atomicrmw sub ptr @as_sleepers, i32 1 seq_cst
  br label %spin
work:
  call void @participate(i32 %self, i32 %g)
  br label %wait
exit:
  %r1 = atomicrmw sub ptr @as_ready, i32 1 seq_cst
  ret void
}}

; Take the region lock for good (later launches run serially in their caller), then bump the
; generation so that a worker about to sleep on the old one does not, and wake them all.
define void @autosched_pool_shutdown() {{
entry:
  br label %lock
lock:
  %cx = cmpxchg ptr @as_busy, i32 0, i32 1 acquire monotonic
  %locked = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %locked, label %stop, label %wait
wait:
  call void @pause()
  br label %lock
stop:
  store atomic i32 1, ptr @as_shutdown seq_cst, align 4
  %g0 = load atomic i32, ptr @as_gen monotonic, align 4
  %g = add i32 %g0, 1
  store atomic i32 %g, ptr @as_gen seq_cst, align 4
  call void @futex_wake(ptr @as_gen, i32 2147483647)
  ret void
}}

define void @autosched_pool_reset() {{
  store atomic i32 0, ptr @as_ready seq_cst, align 4
  store atomic i32 0, ptr @as_busy seq_cst, align 4
  store atomic i32 0, ptr @as_sleepers seq_cst, align 4
  store atomic i32 0, ptr @as_caller_waiting seq_cst, align 4
  store atomic i32 0, ptr @as_shutdown seq_cst, align 4
  ret void
}}

; The older ABI: task(closure, task_id, num_tasks) once per task, through the pool.
define internal void @legacy_task(ptr %pack, i64 %begin, i64 %end) {{
entry:
  %fn = load ptr, ptr %pack
  %clp = getelementptr inbounds {{ ptr, ptr, i32 }}, ptr %pack, i32 0, i32 1
  %cl = load ptr, ptr %clp
  %np = getelementptr inbounds {{ ptr, ptr, i32 }}, ptr %pack, i32 0, i32 2
  %n = load i32, ptr %np
  br label %loop
loop:
  %t = phi i64 [ %begin, %entry ], [ %t1, %body ]
  %more = icmp slt i64 %t, %end
  br i1 %more, label %body, label %out
body:
  %t32 = trunc i64 %t to i32
  call void %fn(ptr %cl, i32 %t32, i32 %n)
  %t1 = add i64 %t, 1
  br label %loop
out:
  ret void
}}

define void @autosched_parallel_launch(ptr %fn, ptr %cl, i32 %max_tasks) {{
  %nt = load atomic i32, ptr @autosched_num_threads monotonic, align 4
  %limited = icmp sgt i32 %max_tasks, 0
  %less = icmp slt i32 %max_tasks, %nt
  %cap = and i1 %limited, %less
  %n = select i1 %cap, i32 %max_tasks, i32 %nt
  %pack = alloca {{ ptr, ptr, i32 }}
  store ptr %fn, ptr %pack
  %clp = getelementptr inbounds {{ ptr, ptr, i32 }}, ptr %pack, i32 0, i32 1
  store ptr %cl, ptr %clp
  %np = getelementptr inbounds {{ ptr, ptr, i32 }}, ptr %pack, i32 0, i32 2
  store i32 %n, ptr %np
  %n64 = sext i32 %n to i64
  call void @autosched_parallel_for(ptr @legacy_task, ptr %pack, i64 %n64)
  ret void
}}
"""
