"""Kernel-level micro-profilers: each declares the bottleneck kinds it applies to and the
Nsight Compute metrics it needs, and turns them into findings."""

from kernelpro_plugins_ncu.micro.execution import (
    AtRoofline,
    IssueBound,
    IssueSlotUtilization,
    PipeBound,
    TensorCoresIdle,
    ThreadDivergence,
    UnfusedFp32,
    WarpStallReasons,
)
from kernelpro_plugins_ncu.micro.memory import (
    CacheHitRate,
    DramTrafficExcess,
    LocalMemorySpilling,
    SharedBankConflicts,
    UncoalescedGlobalAccess,
)
from kernelpro_plugins_ncu.micro.occupancy import (
    AchievedOccupancyGap,
    LaunchDominated,
    OccupancyLimiter,
    SmallGrid,
    TailEffect,
    UnitImbalance,
)

ALL_MICRO_PROFILERS = (
    UncoalescedGlobalAccess, SharedBankConflicts, LocalMemorySpilling, CacheHitRate, DramTrafficExcess,
    OccupancyLimiter, AchievedOccupancyGap, TailEffect, UnitImbalance, SmallGrid, LaunchDominated,
    WarpStallReasons, IssueSlotUtilization, IssueBound, PipeBound, ThreadDivergence, TensorCoresIdle, UnfusedFp32, AtRoofline,
)

__all__ = [cls.__name__ for cls in ALL_MICRO_PROFILERS] + ["ALL_MICRO_PROFILERS"]
