"""hydra/launcher=slurm: the submitit plugin's Slurm launcher, waiting for every job and naming each that ended unfinished."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as PluginSlurmLauncher
from omegaconf import OmegaConf

log = logging.getLogger(__name__)
STATE_EVERY_S = 30.0  # how often the wait reports a change in the jobs' Slurm states
RESULT_GRACE_S = 15.0  # how long an ended job's result file may take to show on a network file system (submitit's wait)
DRAIN_S = 600.0  # how long a cancelled job's processes may take to die (KillWait is 30 s by default)


def _say(message: str) -> None:
    print(f"searchbox: {message}", file=sys.stderr, flush=True)


def _own_error(path: Path) -> str:
    """The job's own one-line reason, when searchbox stopped it (errors.task prints `searchbox: <reason>` last)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return next((ln.removeprefix("searchbox: ") for ln in reversed(lines) if ln.startswith("searchbox: ")), "")


def _drain(ids: list[str]) -> None:
    """Until no part of the jobs is left on the cluster. sacct says CANCELLED at scancel, but submitit's job ignores
    the SIGTERM and works on until KillWait's SIGKILL: a run it finishes meanwhile belongs in the tables collected
    next, and a relaunch started before it dies would do its runs a second time."""
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline:
        try:
            out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return  # no squeue to ask: collect what is there
        if not out.stdout.strip():  # an id already purged is an error with nothing listed: gone too
            return
        time.sleep(1.0)
    _say(f"Slurm job(s) {', '.join(ids)} still listed by squeue after {DRAIN_S:.0f} s; collecting what finished so far")


def varying(job_overrides: Sequence[Sequence[str]]) -> list[str]:
    """Each job's overrides that differ between jobs (its grid point), as one short label."""
    if len(job_overrides) == 1:
        return [""]
    common = set.intersection(*(set(o) for o in job_overrides))
    return [" ".join(o for o in filter_overrides(list(overrides)) if o not in common) for overrides in job_overrides]


class SlurmLauncher(PluginSlurmLauncher):
    """Submits the grid as the plugin does (one job per grid point, an array); only the wait differs.

    The plugin returns at the first job, in grid order, that ended without a result (scancel, a time limit it
    could not requeue, a node failure, memory) with submitit's traceback, while later jobs may still run and
    the tables are not collected; a relaunch then would run beside them. Here every job is awaited, each one
    that ended unfinished is named in one line (its grid point, Slurm state and log), the finished runs are
    collected, and the sweep exits 2: the same command again does only the runs that did not finish.
    Interrupted while it waits, it says that the jobs run on and how to stop them.
    """

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        assert self.config is not None and job_overrides
        params = dict(self.params)
        # As the plugin builds its executor: folder and max_num_timeout at init, the rest as (slurm_)parameters.
        executor = submitit.AutoExecutor(cluster="slurm", folder=params.pop("submitit_folder"),
                                         slurm_max_num_timeout=params.pop("max_num_timeout"))
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        log.info(f"Submitit 'slurm' sweep output dir : {sweep_dir}")
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        labels = varying(job_overrides)
        job_params = []
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            log.info(f"\t#{idx} : {' '.join(filter_overrides(list(overrides)))}")
            job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        jobs = executor.map_array(self, *zip(*job_params))
        ids = sorted({j.job_id.split("_")[0] for j in jobs})
        print(f"[sweep] Slurm job(s) {', '.join(ids)}: {len(jobs)} job(s); logs in {sweep_dir}/.submitit/", file=sys.stderr, flush=True)
        try:
            self._wait(jobs)
        except KeyboardInterrupt:
            _say(f"interrupted: the Slurm jobs run on without this process (squeue -j {','.join(ids)}); wait for them or "
                 f"scancel {' '.join(ids)} before running the same command again, or both would do the same runs")
            raise SystemExit(130) from None
        unfinished = self._unfinished(jobs)
        if not unfinished:
            return [job.results()[0] for job in jobs]
        _drain(ids)
        for i in unfinished:
            job = jobs[i]
            said = _own_error(Path(job.paths.stderr))
            _say(f"Slurm job {job.job_id} ({labels[i] or 'the sweep'}) ended {job.state} before its runs finished"
                 f"{': ' + said if said else ''}; log: {job.paths.stderr}")
        from searchbox.record.collect import collect, write

        runs, turns, calls = collect([sweep_dir])
        write(sweep_dir, runs, turns, calls)
        print(f"[sweep] {len(runs)} runs -> {sweep_dir}/runs.parquet", file=sys.stderr, flush=True)
        _say(f"{len(unfinished)} of {len(jobs)} Slurm job(s) ended unfinished (above); their finished runs are kept, "
             "and the same command again does only the rest")
        raise SystemExit(2)

    @staticmethod
    def _unfinished(jobs: list) -> list[int]:
        """The jobs that ended without their result (killed, cancelled, failed outside the task, or timed out past
        max_num_timeout). A job Slurm saw complete gets RESULT_GRACE_S for a result file that a network file
        system has not shown yet."""
        deadline = time.monotonic() + RESULT_GRACE_S
        while time.monotonic() < deadline and any(not job.paths.result_pickle.exists() and job.state == "COMPLETED" for job in jobs):
            time.sleep(1.0)
        return [i for i, job in enumerate(jobs) if not job.paths.result_pickle.exists() or job.exception() is not None]

    @staticmethod
    def _wait(jobs: list) -> None:
        """Until every job has ended, saying so when the jobs' Slurm states change (at most every STATE_EVERY_S)."""
        said: dict[str, int] = {}
        last = -STATE_EVERY_S
        while True:
            pending = [job for job in jobs if not job.done()]
            if not pending:
                return
            if time.monotonic() - last >= STATE_EVERY_S:
                states: dict[str, int] = {}
                for job in jobs:
                    state = (job.state or "UNKNOWN").split()[0]  # "CANCELLED by 0": the state alone
                    states[state] = states.get(state, 0) + 1
                if states != said and set(states) != {"UNKNOWN"}:  # UNKNOWN: sacct has not seen the jobs yet
                    print(f"[sweep] Slurm jobs: {', '.join(f'{n} {s}' for s, n in sorted(states.items()))}", file=sys.stderr, flush=True)
                    said = states
                last = time.monotonic()
            time.sleep(1.0)
