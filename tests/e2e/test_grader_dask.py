"""Workers that die or differ, and who may talk to them. A class graded on a real Dask
deployment as the README starts it (certificates from scripts/cluster_certs.sh, a `dask
scheduler` and two `dask worker` processes on 127.0.0.1 with mutual TLS, random ports), one
worker killed mid-class: every student is graded exactly once, with the same scores as
`--jobs 1` on this machine; and while it runs, a client without the cluster's certificate (none,
another CA's, plain TCP) is refused. A notebook that kills its worker every time is `error`, and
the class goes on. A worker with another checkout grades nothing. The grader refuses a plain
scheduler that is not on loopback unless told --insecure-plain-tcp. (--no-jail throughout: the
jail is not what this is about.)
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from autograder.model.paths import ROOT
from autograder.publish.outdir import state_path
from autograder.run import cluster
from examples.build import MISTAKES, with_mistakes
from tests.corpus import hostile

# pytest-timeout: a class graded on a Dask cluster per test (setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
NOTEBOOK = hostile.course_notebooks()[0]
DASK = Path(sys.executable).parent / "dask"


def klass() -> list[hostile.Case]:
    wrong = [m for m in MISTAKES if m.notebook == NOTEBOOK]
    cases = [
        hostile.Case(f"s{i}_correct", "", {NOTEBOOK: hostile.dump(hostile.correct(NOTEBOOK))},
                     {NOTEBOOK: hostile.Expect("ok")})
        for i in range(2)
    ]  # fmt: skip
    for i, m in enumerate(wrong):
        cases.append(
            hostile.Case(f"s{i}_wrong", "", {NOTEBOOK: hostile.dump(with_mistakes(NOTEBOOK, [m]))},
                         {NOTEBOOK: hostile.Expect("ok", frozenset({m.grade_id}))})
        )  # fmt: skip
    return cases


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:
        return subprocess.Popen(
            [str(DASK), *args], env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def scores(out: Path) -> dict[tuple[str, str, str], str]:
    return {
        (r["student"], r["notebook"], r["status"]): r["score"]
        for r in hostile.read_csv(out / "grades.csv")
    }


def certificates(folder: Path) -> Path:
    """The README's certificates: scripts/cluster_certs.sh FOLDER."""
    script = ROOT / "scripts" / "cluster_certs.sh"
    subprocess.run(["bash", str(script), str(folder)], check=True, capture_output=True, timeout=60)
    return folder


def tls(certs: Path, role: str) -> list[str]:
    """`dask scheduler` / `dask worker` options of the README."""
    return ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / f"{role}.pem"),
            "--tls-key", str(certs / f"{role}.key")]  # fmt: skip


def handshake(port: int, context: ssl.SSLContext) -> str:
    """'accepted', or why the scheduler refused a TLS connection made with `context`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw) as connection:
                connection.sendall(b"\0" * 8)
                connection.recv(1)  # TLS 1.3: a refused certificate is said here
        return "accepted"
    except ssl.SSLError as err:
        return err.reason or str(err)
    except OSError as err:  # reset or closed without a word
        return type(err).__name__


def client_context(certs: Path | None, ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    context.check_hostname = False
    if certs is not None:
        context.load_cert_chain(certs / "client.pem", certs / "client.key")
    return context


def plain_dask(address: str) -> str:
    """What Dask's own plain TCP connection to `address` gets ('connected' or the error)."""
    from distributed.comm import connect

    async def attempt() -> str:
        comm = await connect(address, timeout=10)
        await comm.write({"op": "identity"})
        await comm.read()
        return "connected"

    try:
        return asyncio.run(asyncio.wait_for(attempt(), 20))
    except Exception as err:  # noqa: BLE001 - any failure is a refusal
        return type(err).__name__


def refusals(address: str, certs: Path, stranger: Path) -> dict[str, str]:
    port = int(address.rsplit(":", 1)[1])
    return {
        "with the cluster's client certificate": handshake(
            port, client_context(certs, certs / "ca.pem")
        ),
        "without a certificate": handshake(port, client_context(None, certs / "ca.pem")),
        "with another CA's certificate": handshake(
            port, client_context(stranger, certs / "ca.pem")
        ),
        "plain TCP": plain_dask(address.replace("tls://", "tcp://")),
    }


def test_a_killed_worker_loses_nothing_and_grades_nothing_twice(tmp_path: Path) -> None:
    cases = klass()
    hostile.write_class(tmp_path / "class", cases)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    certs = certificates(tmp_path / "certs")
    stranger = certificates(tmp_path / "stranger")  # another cluster's CA and certificates
    env = {**os.environ, "TMPDIR": str(scratch), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    # the scheduler and workers accept nothing unencrypted (the README's deployment)
    cluster_env = {**env, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}
    address_file = tmp_path / "scheduler.json"
    procs = [
        start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--protocol", "tls",
               *tls(certs, "scheduler"), "--no-dashboard", "--scheduler-file", str(address_file)],
              cluster_env, tmp_path / "scheduler.log"),
    ]  # fmt: skip
    try:
        wait_for(address_file.exists, 60, "the scheduler")
        address = json.loads(address_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:"), address
        for i in range(2):
            procs.append(
                start(["worker", address, *tls(certs, "worker"), "--nthreads", "1",
                       "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
                      cluster_env, tmp_path / f"worker{i}.log")
            )  # fmt: skip
        refused = refusals(address, certs, stranger)
        assert refused.pop("with the cluster's client certificate") == "accepted"
        assert refused["without a certificate"] != "accepted", refused
        # refused in the handshake: the alert (UNKNOWN_CA) or, when the scheduler closes first,
        # an EOF; never a connection
        assert refused["with another CA's certificate"] != "accepted", refused
        assert refused["plain TCP"] != "connected", refused
        out = tmp_path / "out"
        cmd = hostile.grade_command(tmp_path / "class", out, "--scheduler", address, "--no-jail",
                                    "--tls-ca", str(certs / "ca.pem"), "--tls-cert",
                                    str(certs / "client.pem"), "--tls-key",
                                    str(certs / "client.key"), "--notebooks", NOTEBOOK[:2],
                                    "--quiet")  # fmt: skip
        grading = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: list((out / ".state").glob("*/*.json")), 300, "the first grade")
        victim = procs[1]
        os.killpg(victim.pid, signal.SIGKILL)  # as the system's OOM killer would
        victim.wait(10)
        _, err = grading.communicate(timeout=600)
        assert grading.returncode == 0, err.decode()[-3000:]
    finally:
        for proc in procs[::-1]:
            stop(proc)
    assert "Remove worker" in (tmp_path / "scheduler.log").read_text()  # it saw the death
    log = (out / "grader.log").read_text()
    graded = [line.split(" graded ", 1)[1] for line in log.splitlines() if " graded " in line]
    written = Counter(line.split(":", 1)[0] for line in graded)
    assert written == Counter({f"{c.student}/{NOTEBOOK}": 1 for c in cases}), written
    problems = hostile.check(out, cases)
    assert not problems, "\n".join(problems)

    local = tmp_path / "out-local"
    result = hostile.grade(tmp_path / "class", local, "--jobs", "1", "--no-jail",
                           "--notebooks", NOTEBOOK[:2], env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert scores(out) == scores(local)


def test_a_worker_with_another_checkout_refuses_its_tasks(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The README's promise: a worker whose course or grader differs from the grading
    process's grades nothing. Before grading, the proof on the master solutions finds it and
    the run stops in one line; a worker that differs only after the proof (a cluster's new
    worker) refuses each task before any kernel starts. What the run makes of a task its worker
    did not grade (`error`, the reason in grader.log, no state: a rerun grades it) is the same
    as for a killed worker, below."""
    import autograder.model.course
    from autograder.cli import main
    from autograder.model.course import load_masters
    from autograder.worker import pipeline
    from autograder.worker.task import Task

    case = klass()[0]
    hostile.write_class(tmp_path / "class", [case])
    out = tmp_path / "out"
    argv = ["grade", str(tmp_path / "class"), "--out", str(out), "--jobs", "1", "--no-jail",
            "--notebooks", NOTEBOOK[:2], "--quiet"]  # fmt: skip
    monkeypatch.setenv("AUTOGRADER_CACHE", str(tmp_path / "proofs"))
    with monkeypatch.context() as patched:  # the grading process's grader differs, not its worker's
        patched.setattr(autograder.model.course, "grader_hash", lambda: "an older grader")
        assert main(argv) == 2
        assert "another version of the course or grader" in capsys.readouterr().err
        assert not (out / "grades.csv").exists()
        assert not list((out / ".state").glob("*/*.json"))  # nothing graded, nothing trusted

    # after the proof: the worker's own masters against a task from another checkout
    masters = load_masters(notebooks=(NOTEBOOK,))

    def no_kernel(*args, **kwargs):
        raise AssertionError("a kernel started for a task of another checkout")

    runtime = type("Runtime", (), {"masters": masters, "runner": no_kernel, "scorer": no_kernel})
    task = Task(case.student, NOTEBOOK, NOTEBOOK, case.files[NOTEBOOK], "key", "an older grader")
    with pytest.raises(RuntimeError, match="another version of the course or grader"):
        pipeline._grade(task, runtime, time.monotonic())


def test_a_notebook_that_kills_its_worker_twice_is_error_and_the_class_goes_on(
    tmp_path: Path,
) -> None:
    """Without the jail a kernel can kill the worker that started it. The scheduler gives the
    notebook to a fresh worker once (`Limits.worker_retries`), then reports it `error`; the
    other students are graded as usual."""
    honest = klass()[0]
    gid = next(iter(hostile.solutions(NOTEBOOK)))
    killer = hostile.Case(
        "s9_kills_its_worker", "",
        {NOTEBOOK: hostile.dump(hostile.appended(
            NOTEBOOK, gid, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"))},
        {NOTEBOOK: hostile.Expect("error")},
    )  # fmt: skip
    hostile.write_class(tmp_path / "class", [honest, killer])
    out = tmp_path / "out"
    result = hostile.grade(tmp_path / "class", out, "--jobs", "1", "--no-jail",
                           "--notebooks", NOTEBOOK[:2], timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    statuses = {r["student"]: r["status"] for r in hostile.read_csv(out / "grades.csv")}
    assert statuses == {honest.student: "ok", killer.student: "error"}
    log = (out / "grader.log").read_text()
    assert f"{killer.student}/{NOTEBOOK}: not graded (KilledWorker)" in log
    # nothing of it is trusted later: no state, so a rerun with the same OUT grades it again
    assert state_path(out, honest.student, NOTEBOOK).is_file()
    assert not state_path(out, killer.student, NOTEBOOK).exists()


@pytest.mark.parametrize(
    ("address", "options", "refused"),
    [
        ("tcp://10.0.0.5:8786", [], "anyone who can reach it can run code"),
        ("10.0.0.5:8786", [], "anyone who can reach it can run code"),  # Dask's default: tcp
        ("tcp://10.0.0.5:8786", ["--insecure-plain-tcp"], None),
        ("tcp://127.0.0.1:8786", [], None),
        ("tcp://localhost:8786", [], None),
        ("tls://10.0.0.5:8786", [], "needs --tls-ca"),
        ("tls://10.0.0.5:8786", ["--tls-ca", "missing.pem"], "no such file"),
    ],
)
def test_the_grader_refuses_a_plain_scheduler_off_this_machine(
    address: str, options: list[str], refused: str | None, tmp_path: Path, capsys
) -> None:
    """Without --insecure-plain-tcp, only tls:// (with its files) or loopback; the refusal is
    one line and exit code 2, before anything is graded."""
    import argparse

    from autograder.cli import grade_settings, main, parser

    (tmp_path / "class" / "alice").mkdir(parents=True)
    argv = ["grade", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--scheduler",
            address, *options]  # fmt: skip
    if refused is None:
        args: argparse.Namespace = parser().parse_args(argv)
        settings, _, _ = grade_settings(args)
        assert settings.scheduler == address and settings.tls is None
        return
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and refused in err, err
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_tls_files_come_from_the_options_or_from_dasks_configuration(tmp_path: Path) -> None:
    import dask

    certs = certificates(tmp_path / "certs")
    given = cluster.check("tls://10.0.0.5:8786", certs / "ca.pem", certs / "client.pem",
                          certs / "client.key")  # fmt: skip
    assert given == cluster.TLSFiles(certs / "ca.pem", certs / "client.pem", certs / "client.key")
    config = {key: str(certs / name) for key, name in zip(cluster.CONFIG.values(),
              ("ca.pem", "client.pem", "client.key"), strict=True)}  # fmt: skip
    with dask.config.set(config):
        assert cluster.check("tls://10.0.0.5:8786") == given
    security = given.security()
    assert security.require_encryption and security.tls_client_cert == str(certs / "client.pem")
