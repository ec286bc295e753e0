"""A harness: the process that runs one model for the judge, call by call.

    python -m kernelpro.evaluate.harness      (started by the judge through the reaper)

There are two per evaluation. The *reference* harness builds the problem's ``Model`` (and
its ``torch.compile`` form, and a float64 copy for second opinions); the *candidate*
harness imports the candidate and builds ``ModelNew``, after confining itself
(:func:`kernelpro.evaluate.sandbox.confine`). Both run the same code, so a call costs the
same around the model in both, which is what lets the judge check the candidate's
reported times against its own clock (:mod:`kernelpro.evaluate.timing`).

The harness holds nothing the verdict depends on: inputs arrive in buffers the judge
filled, outputs leave through buffers the judge reads and compares, and every number it
reports about the candidate is either checked from outside (times, against the judge's
clock; threads and processes, through ``/proc``) or is a first-line check whose failure can
only reject. Whatever the candidate does to this process's modules changes only what this
process says, never how the judge judges it.

Requests are JSON messages (:mod:`kernelpro.evaluate.protocol`) with an ``op``; every
request gets one answer except ``run`` (a call with no answer, for measurements that queue
many calls) whose failure is told at the next ``sync``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from types import FrameType
from typing import Any

import torch

from kernelpro.evaluate import compare, policy, transport
from kernelpro.evaluate.compile import install_build_hooks, trim_compiler_log
from kernelpro.evaluate.guard import backend_flags, set_default_precision, set_reference_precision
from kernelpro.evaluate.interpret import prepare_interpreter
from kernelpro.evaluate.loader import build_model, load_module, seed_everything
from kernelpro.evaluate.protocol import FD_ENV, Channel, Closed
from kernelpro.evaluate.timing import EventTimer
CANDIDATE_MODULE = "kernelpro_candidate"


class Failure(Exception):
    """A request failed; ``verdict`` says how (a :class:`kernelpro.records.Verdict` value)."""

    def __init__(self, verdict: str, reason: str, log: str = "", evaluator: bool = False) -> None:
        super().__init__(reason)
        self.verdict, self.reason, self.log, self.evaluator = verdict, reason, log, evaluator

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "verdict": self.verdict, "reason": self.reason}
        if self.log:
            out["log"] = self.log
        if self.evaluator:  # the evaluator's own machinery failed, not the model
            out["evaluator"] = True
        return out


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]


def is_cuda_error(exc: BaseException) -> bool:
    text = str(exc)
    markers = ("CUDA error", "illegal memory access", "misaligned address", "device-side assert",
               "unspecified launch failure", "an illegal instruction", "CUDA_ERROR", "cudaError",
               "AcceleratorError")
    return any(m in text for m in markers) or type(exc).__name__ == "AcceleratorError"


def is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)) or any(
        m in text for m in ("out of memory", "can't allocate memory", "Cannot allocate memory"))


def classify_import_error(exc: BaseException) -> Failure:
    text = "".join(traceback.format_exception_only(type(exc), exc))
    if isinstance(exc, SyntaxError):
        return Failure("invalid", f"candidate has a syntax error at line {exc.lineno}: {exc.msg}")
    compile_markers = ("Error building extension", "ninja: build stopped", "nvcc fatal", "ptxas", "error:")
    if any(m in text for m in compile_markers) or type(exc).__name__ in ("CompilationError", "CalledProcessError",
                                                                        "NvccError"):
        return Failure("compile_error", "compilation failed: " + one_line(exc), log=trim_compiler_log(text))
    if is_oom(exc):
        return Failure("oom", one_line(exc))
    if is_cuda_error(exc):
        return Failure("cuda_error", one_line(exc))
    return Failure("runtime_error", "importing the candidate failed: " + one_line(exc))


def classify_runtime(exc: BaseException, prefix: str) -> Failure:
    if isinstance(exc, Failure):
        return exc
    if is_oom(exc):
        return Failure("oom", prefix + one_line(exc))
    if is_cuda_error(exc):
        return Failure("cuda_error", prefix + one_line(exc))
    return Failure("runtime_error", prefix + one_line(exc))


# submodules whose forward depends on training mode, named in the eval-mode flag's message
_MODE_DEPENDENT = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._NormBase, torch.nn.RReLU)


def _mentions_training(problem: Any) -> bool:
    """Whether the problem's source could make its forward depend on training mode without
    a module of :data:`_MODE_DEPENDENT` (``self.training``, ``F.dropout(...)``); True when
    the source cannot be read."""
    try:
        with open(problem.__file__, encoding="utf-8", errors="replace") as f:
            text = f.read().lower()
    except (OSError, AttributeError, TypeError):
        return True
    return "training" in text or "dropout" in text or "batch_norm" in text


def overlaps(t: torch.Tensor) -> bool:
    """Whether some elements of ``t`` may share memory (an ``expand``-ed or ``as_strided``
    view): taken dimension by dimension from the smallest stride up, each stride must step
    past every position the smaller ones reach. Dense, permuted and sliced tensors pass; a
    layout that fails without overlapping (none of PyTorch's own) is only copied."""
    if t.numel() <= 1 or t.layout != torch.strided or t.is_meta:
        return False
    reach = 0
    for stride, size in sorted((abs(st), n) for n, st in zip(t.shape, t.stride()) if n > 1):
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def own_memory(out: Any) -> Any:
    """``out`` with every output tensor whose elements share memory made whole, inside the
    timed call: a model returning the stride-0 ``expand`` of a row where the reference writes
    every element would otherwise leave that writing to the export copy, after the clock."""
    if isinstance(out, torch.Tensor):
        return out.contiguous() if type(out) is torch.Tensor and overlaps(out) else out
    if isinstance(out, (tuple, list)):  # namedtuples and torch.return_types too: judged as tuples
        items = [own_memory(x) for x in out]
        if all(a is b for a, b in zip(items, out)):
            return out  # nothing to make whole: the value as returned
        return items if isinstance(out, list) else tuple(items)
    return out


def candidate_threads() -> list[str]:
    """Python threads other than this one that belong to the candidate: started with a
    target (or a Thread subclass) from the candidate's module, or executing the candidate's
    code right now (a thread pool running submitted work: ``sys._current_frames``)."""
    out: list[str] = []
    me = threading.get_ident()
    frames = sys._current_frames()
    frame: FrameType | None
    f: FrameType | None
    # this thread's own entry is this frame: held, it makes a cycle that keeps the callers'
    # frames, and the outputs in their locals, alive until the cyclic collector runs
    frames.pop(me, None)
    try:
        names = {t.ident: t.name for t in threading.enumerate()}
        for t in threading.enumerate():
            target = getattr(t, "_target", None)
            mod = getattr(target, "__module__", None) if target is not None else type(t).__module__
            if mod == CANDIDATE_MODULE and t.is_alive() and t.ident != me:
                out.append(t.name)
        for ident, frame in frames.items():
            if names.get(ident) in out:
                continue
            f = frame
            while f is not None:
                if f.f_globals.get("__name__") == CANDIDATE_MODULE:
                    out.append(names.get(ident, str(ident)))
                    break
                f = f.f_back
    finally:
        frames.clear()
        frame = f = None
    return out


class Harness:
    def __init__(self, chan: Channel, hello: dict[str, Any]) -> None:
        self.chan = chan
        self.role = hello["role"]
        self.device = hello["device"]
        self.cuda = self.device.startswith("cuda")
        self.timer = EventTimer(self.device)
        self.models: dict[str, Any] = {}
        self.problem: Any = None
        self.module: Any = None
        self.seed = 0
        self.buffers: list[transport.Buffer] = []
        self.in_tensors: list[torch.Tensor] = []
        self.inputs: list[Any] = []
        self.outputs: dict[str, list[torch.Tensor | None]] = {}
        self.last: Any = None
        self.deferred: Failure | None = None
        self.l2: Any = None

    # --- the loop ------------------------------------------------------------------------------

    def serve(self) -> None:
        with torch.no_grad():
            while True:
                try:
                    msg = self.chan.recv()
                except Closed:
                    return
                op = str(msg.get("op", ""))
                handler = getattr(self, f"op_{op}", None)
                try:
                    if handler is None:
                        raise Failure("runtime_error", f"unknown request {op!r}")
                    answer = handler(msg)
                except Failure as f:
                    answer = f.answer()
                except BaseException as exc:  # the model's failure is an answer, not the harness's end
                    answer = classify_runtime(exc, str(msg.get("prefix", ""))).answer()
                if op == "run":
                    if answer is not None and not answer.get("ok", True) and self.deferred is None:
                        self.deferred = Failure(answer["verdict"], answer["reason"])
                    continue
                self.chan.send(answer if answer is not None else {"ok": True})
                if op == "exit":
                    return

    # --- set-up ---------------------------------------------------------------------------------

    def op_setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference: load the problem and build its Model after the seed, in fp32 without
        TF32 (the settings its outputs are computed with; a request can ask for the defaults)."""
        self._reference_only()
        self.seed = int(msg["seed"])
        set_reference_precision()
        try:
            self.problem = load_module(msg["problem"], "kernelpro_problem")
            self.models["main"] = build_model(self.problem.Model, self.problem, self.seed, self.device)
        except (Exception, SystemExit) as exc:  # sys.exit() in the problem file: the problem's failure
            raise Failure("problem_error", "the problem itself failed to load: " + one_line(exc)) from None
        self._settle_l2()
        return {"ok": True}

    def op_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The candidate: import it (its native code is usually built already, by the compile stage)."""
        self.seed = int(msg["seed"])
        set_default_precision()  # the candidate starts from PyTorch's defaults, as the timed baselines run; changes are flagged
        install_build_hooks()
        try:
            self.problem = load_module(msg["problem"], "kernelpro_problem")
        except (Exception, SystemExit) as exc:  # sys.exit() in the problem file: the problem's failure
            raise Failure("problem_error", "the problem itself failed to load: " + one_line(exc)) from None
        self._settle_l2()  # before any candidate code: what it sets later is reported
        prepare_interpreter()  # Triton's interpreter, when the evaluator chose it (a CPU device)
        t0 = time.monotonic()
        try:
            self.module = load_module(msg["candidate"], CANDIDATE_MODULE)
        except Exception as exc:
            raise classify_import_error(exc) from None
        if not hasattr(self.module, "ModelNew"):
            raise Failure("invalid", "candidate defines no ModelNew")
        return {"ok": True, "load_s": time.monotonic() - t0}

    def op_build(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The candidate: construct ModelNew after the seed the reference was built with."""
        try:
            self.models["main"] = build_model(self.module.ModelNew, self.problem, self.seed, self.device)
        except Exception as exc:
            raise classify_runtime(exc, "constructing ModelNew failed: ") from None
        return {"ok": True}

    def op_inputs(self, msg: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._attach_inputs(msg)
        except Exception as exc:
            raise Failure("crash", "the evaluator failed: " + one_line(exc), evaluator=True) from None

    def _attach_inputs(self, msg: dict[str, Any]) -> dict[str, Any]:
        specs = msg["specs"]
        fds = self.chan.take_fds(sum(1 for s in specs if s["buffer"]["kind"] == "host"))
        self.in_tensors = []
        for spec in specs:
            fd = fds.pop(0) if spec["buffer"]["kind"] == "host" else -1
            buf = transport.Buffer.open(spec["buffer"], self.device, fd)
            self.buffers.append(buf)
            self.in_tensors.append(buf.view(transport.dtype_of(spec["dtype"]), tuple(spec["shape"]),
                                            tuple(spec["stride"])))
        self.inputs = transport.build_tree(msg["tree"], self.in_tensors)
        return {"ok": True}

    def op_outputs(self, msg: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._attach_outputs(msg)
        except Exception as exc:
            raise Failure("crash", "the evaluator failed: " + one_line(exc), evaluator=True) from None

    def _attach_outputs(self, msg: dict[str, Any]) -> dict[str, Any]:
        specs = msg["specs"]
        fds = self.chan.take_fds(sum(1 for s in specs if s and s["buffer"]["kind"] == "host"))
        views: list[torch.Tensor | None] = []
        for spec in specs:
            if spec is None:
                views.append(None)
                continue
            fd = fds.pop(0) if spec["buffer"]["kind"] == "host" else -1
            buf = transport.Buffer.open(spec["buffer"], self.device, fd)
            self.buffers.append(buf)
            views.append(buf.view(transport.dtype_of(spec["dtype"]), tuple(spec["shape"])))
        self.outputs[str(msg["key"])] = views
        return {"ok": True}

    def op_compile(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference's ``torch.compile`` form (``mode``: torch.compile's, default its
        default), built and called once under PyTorch's default flags (the compiled baselines
        are timed under them), kept as ``key``; the seconds it took."""
        self._reference_only()
        flags = backend_flags()
        set_default_precision()
        mode = msg.get("mode")
        t0 = time.monotonic()
        try:
            compiled = torch.compile(self.models["main"], mode=mode) if mode else torch.compile(self.models["main"])
            compiled(*self.inputs)
            self._sync()
        except Exception as exc:  # optional: say why it is missing
            return {"ok": True, "compiled": False, "reason": one_line(exc)}
        finally:
            from kernelpro.evaluate.guard import restore_backend_flags

            restore_backend_flags(flags)
        self.models[str(msg.get("key", "compiled"))] = compiled
        return {"ok": True, "compiled": True, "compile_s": time.monotonic() - t0}

    def op_bounds(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference's FLOPs and minimum bytes (:func:`kernelpro.evaluate.bounds.estimate`)."""
        self._reference_only()
        from kernelpro.evaluate import bounds

        out = self.models["main"](*self.inputs)
        known = msg.get("flops")
        work = bounds.estimate(self.models["main"], self.inputs, out, int(msg["l2_bytes"]),
                               flops=float(known) if known is not None else None)
        return {"ok": True, "flops": work.flops, "bytes_min": work.bytes_min, "dtype": work.dtype}

    def op_mode_check(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Whether the reference computes otherwise in training mode (the evaluator judges
        models in eval mode): a second reference built as the first, in training mode, called
        on the current inputs under the same seed as the reference, its output compared with
        the evaluator's ``tolerances``. ``modules``: the kinds of
        its submodules known to behave differently, for the message."""
        self._reference_only()
        model = self.models.get("main")
        if not isinstance(model, torch.nn.Module):
            return {"ok": True, "differs": False, "modules": []}
        kinds = sorted({type(m).__name__ for m in model.modules() if isinstance(m, _MODE_DEPENDENT)})
        if not kinds and not _mentions_training(self.problem):
            return {"ok": True, "differs": False, "modules": []}  # nothing that could: no second model built
        trained: Any = None
        a: Any = None
        b: Any = None
        try:
            trained = build_model(self.problem.Model, self.problem, self.seed, self.device).train()
            seed_everything(self.seed)
            a = trained(*self.inputs)
            seed_everything(self.seed)
            b = model(*self.inputs)
            tols = {str(k): (float(v[0]), float(v[1])) for k, v in (msg.get("tolerances") or {}).items()}
            differs = not compare.compare(a, b, tols, stop_early=True).ok
        except Exception as exc:  # the flag is information: a model that cannot run in training mode gets none
            return {"ok": True, "differs": None, "modules": kinds, "error": one_line(exc)[:300]}
        finally:
            trained = a = b = None
        return {"ok": True, "differs": differs, "modules": kinds}

    def _reference_only(self) -> None:
        if self.role != "reference":
            raise Failure("runtime_error", "a reference-only request reached the candidate's harness")

    def _model(self, key: str) -> Any:
        if key == "fp64":
            self._reference_only()
            if "fp64" not in self.models:
                model = build_model(self.problem.Model, self.problem, self.seed, self.device)
                self.models["fp64"] = model.double() if isinstance(model, torch.nn.Module) else model
        if key not in self.models:
            raise Failure("runtime_error", f"no model {key!r} in this harness")
        return self.models[key]

    def _args(self, key: str) -> list[Any]:
        if key == "fp64":
            return [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in self.inputs]
        return self.inputs

    # --- calls ---------------------------------------------------------------------------------

    def _precision(self, msg: dict[str, Any]) -> bool:
        """The reference's calls run in strict fp32 unless the request asks for PyTorch's
        default flags (``"flags": "default"``: the timed baselines); True when switched, to
        be switched back after the call (outside any timed region)."""
        if msg.get("flags") == "default" and self.role == "reference":
            set_default_precision()
            return True
        return False

    def op_call(self, msg: dict[str, Any]) -> dict[str, Any]:
        switched = self._precision(msg)
        try:
            return self._call(msg)
        finally:
            if switched:
                set_reference_precision()

    def _call(self, msg: dict[str, Any]) -> dict[str, Any]:
        key = str(msg.get("model", "main"))
        model, args = self._model(key), self._args(key)
        prefix = str(msg.get("prefix", "forward failed: "))
        found_l2: list[str] = []
        if msg.get("reset_l2") and self.cuda:
            found_l2 = self._reset_l2()
        compute_ops: list[str] = []
        ev = sy = None
        try:
            if msg.get("policy") in ("no_torch_compute", "own_kernel"):
                rec = policy.ComputeRecorder()
                with rec:
                    out = model(*args)
                compute_ops = sorted(rec.compute_ops)
            elif msg.get("time"):
                ev, sy, out = self.timer.once(lambda: own_memory(model(*args)))
            else:
                out = model(*args)
            threads = candidate_threads()  # in both roles, so a call costs the same around the model
            self._sync()
        except Exception as exc:
            raise classify_runtime(exc, prefix) from None
        answer: dict[str, Any] = {"ok": True, "out": transport.describe_output(out, self.in_tensors),
                                  "threads": threads}
        if ev is not None:
            answer.update(event_ms=ev, sync_ms=sy)
        if compute_ops:
            answer["compute_ops"] = compute_ops
        if found_l2:
            answer["l2"] = found_l2
        if msg.get("export"):
            answer["exported"] = self._export(out, str(msg.get("into", key)))
            out = None
        else:
            self.last = out
        return answer

    def op_export(self, msg: dict[str, Any]) -> dict[str, Any]:
        out, self.last = self.last, None
        return {"ok": True, "exported": self._export(out, str(msg.get("into", "main")))}

    def _export(self, out: Any, key: str) -> list[bool]:
        """Copy each output tensor into its buffer (when it fits: a plain dense tensor of the
        buffer's shape and dtype on this device); which ones were copied."""
        views = self.outputs.get(key, [])
        done = []
        k = 0  # the judge holds a buffer per tensor output: a non-tensor leaf takes none
        for leaf in transport.output_tensors(out):
            if not isinstance(leaf, torch.Tensor):
                done.append(False)
                continue
            view = views[k] if k < len(views) else None
            k += 1
            ok = (view is not None and type(leaf) is torch.Tensor and leaf.layout == torch.strided
                  and not leaf.is_meta and leaf.device.type == view.device.type and leaf.shape == view.shape
                  and leaf.dtype == view.dtype)
            if ok:
                assert view is not None
                view.copy_(leaf)
            done.append(ok)
        self._sync()
        return done

    def op_run(self, msg: dict[str, Any]) -> None:
        """One call with no answer (measurements queue many); a failure is kept for ``sync``."""
        if self.deferred is None:
            switched = self._precision(msg)
            try:
                self.models[str(msg.get("model", "main"))](*self.inputs)
            finally:
                if switched:
                    set_reference_precision()
        return None

    def op_sync(self, msg: dict[str, Any]) -> dict[str, Any]:
        self._sync()
        if self.deferred is not None:
            failure, self.deferred = self.deferred, None
            raise failure
        return {"ok": True}

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    # --- timing helpers -------------------------------------------------------------------------

    def op_gap0(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "ms": self.timer.gap_ms(lambda: None, int(msg.get("reps", 30)))}

    def op_spin(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One same-length control call: a one-stream spin of about ``stream_ms``, synchronized."""
        return {"ok": True, "ms": self.timer.spin_gap_ms(float(msg["stream_ms"]), 1)}

    def _settle_l2(self) -> None:
        """A first reset, before any call: what a new context starts with is not the model's doing."""
        if self.cuda:
            self._reset_l2()
            self.l2.found.clear()

    def _reset_l2(self) -> list[str]:
        if self.l2 is None:
            from kernelpro.evaluate.gpu_state import L2State

            self.l2 = L2State()
        return self.l2.reset([torch.cuda.current_stream().cuda_stream, 0])

    # --- checks the judge asks for ------------------------------------------------------------------

    def op_kernels(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Names of the GPU kernels one call launches (call policy ``own_kernel``)."""
        model = self.models["main"]
        try:
            names = policy.launched_kernels(lambda: model(*self.inputs))
        except Exception as exc:
            raise classify_runtime(exc, "forward failed: ") from None
        return {"ok": True, "kernels": names}

    def op_trim(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Hand the allocator's cached free blocks back to the driver (the judge asks before
        the candidate's calls: what the reference's eager, compiled and training-mode calls
        left cached is room the candidate's process cannot use); the bytes still reserved."""
        if not self.cuda:
            return {"ok": True, "reserved": 0}
        self._sync()
        torch.cuda.empty_cache()
        return {"ok": True, "reserved": int(torch.cuda.memory_reserved())}

    def op_flags(self, msg: dict[str, Any]) -> dict[str, Any]:
        from kernelpro.evaluate.guard import STARTUP_FLAGS

        return {"ok": True, "flags": backend_flags(), "startup": dict(STARTUP_FLAGS)}

    def op_exit(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}


def warm_up(msg: dict[str, Any]) -> None:
    """A harness started ahead of its job (:mod:`kernelpro.evaluate.runner`): the
    reference's opens its CUDA context while it waits. The candidate's does not: what the
    CUDA driver reads from the environment at that point (its JIT cache) is the
    candidate's, told only with its hello."""
    if msg.get("role") == "reference" and str(msg.get("device", "")).startswith("cuda"):
        torch.zeros(1, device=msg["device"])
        torch.cuda.synchronize()


def preload(msg: dict[str, Any]) -> None:
    """A reference's harness started ahead of a problem's baseline job, which counts the
    reference's FLOPs and compiles it with ``torch.compile``: import the compiler stack both
    need (about 4 s of each, cold, on the H200 host) while it waits. CPU work only (it may
    come while the evaluation before is timed), and on a GPU device only: on a CPU device
    it would compete with what is being timed."""
    if msg.get("role") != "reference" or not str(msg.get("device", "")).startswith("cuda"):
        return
    t0 = time.monotonic()
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False), torch.no_grad():  # its first use imports the rest
        torch.ones(2, 2) @ torch.ones(2, 2)
    print(f"preloaded torch.compile's stack in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)


def apply_env(env: dict[str, str]) -> None:
    """Add the job's variables (a harness started ahead of its job gets them with its hello):
    whatever reads them later (Triton, inductor, torch's extension builder, the CUDA
    driver of a process without a context yet, ``tempfile``) sees them as if set at start."""
    import tempfile

    for key, value in env.items():
        os.environ[str(key)] = str(value)
    if "TMPDIR" in env:
        tempfile.tempdir = None  # tempfile caches the directory it chose first
    if env.get("PYTHONDONTWRITEBYTECODE"):
        sys.dont_write_bytecode = True


def enter_dir(cwd: str) -> None:
    """Work in the job's directory. ``python -m`` put the directory the process started in
    first on ``sys.path``: a process started ahead of its job started elsewhere, so the
    job's directory takes that place."""
    started_in = os.getcwd()
    os.chdir(cwd)
    sys.path[:] = [cwd if p in (started_in, "") else p for p in sys.path]


def main() -> None:
    fd = int(os.environ.pop(FD_ENV))
    chan = Channel.from_fd(fd)
    # started ahead of its job, before any candidate code: Triton's cache key, which the
    # first Triton call (a candidate's kernel, torch.compile's) would otherwise compute on the
    # device's time
    from kernelpro.evaluate.triton_stubs import warm_cache_key

    warm_cache_key()
    try:
        hello = chan.recv()
        while hello.get("warm") or hello.get("preload"):  # started ahead: what it may do meanwhile
            if hello.get("warm"):
                warm_up(hello)
            else:
                preload(hello)
            hello = chan.recv()
    except Closed:  # started ahead, and discarded before its job came
        os._exit(0)
    if not hello.get("role"):  # told to leave before its job came
        chan.send({"ok": True})
        os._exit(0)
    apply_env(hello.get("env") or {})
    confined = None
    if hello["role"] == "candidate":
        from kernelpro.evaluate.sandbox import confine

        confined = confine(hello.get("writable", [])) if hello.get("confine", True) else "unconfined: not asked to"

    else:
        from kernelpro.evaluate.sandbox import set_undumpable

        set_undumpable()
    if hello.get("cwd"):
        enter_dir(hello["cwd"])
    limit = hello.get("memory_limit_mb")
    if limit and not str(hello.get("device", "")).startswith("cuda"):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (int(limit) << 20, int(limit) << 20))
    chan.send({"ok": True, "pid": os.getpid(), "confined": confined})
    Harness(chan, hello).serve()
    sys.stdout.flush()
    sys.stderr.flush()
    # leave without running the candidate's atexit handlers or destructors
    os._exit(0)


if __name__ == "__main__":
    main()
