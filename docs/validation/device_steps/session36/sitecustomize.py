import os, sys
if os.environ.get("KP_PROF") and "kernelpro.evaluate.judge_main" in getattr(sys, "orig_argv", []):
    import cProfile, pstats
    from kernelpro.evaluate import judge as _j
    _orig = _j.Judge.run
    def run(self):
        p = cProfile.Profile()
        p.enable()
        try:
            return _orig(self)
        finally:
            p.disable()
            p.dump_stats(os.path.join(os.environ["KP_PROF"], "judge-%d.prof" % os.getpid()))
    _j.Judge.run = run
