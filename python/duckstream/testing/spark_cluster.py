"""A Spark standalone cluster on loopback: pyspark's own master and one worker, no download.

pyspark's wheel carries Spark's jars and its ``bin/spark-class`` launcher, which runs the
standalone daemons (``org.apache.spark.deploy.master.Master``, ``...worker.Worker``) as any
Spark distribution does. A driver that sets ``spark.master`` to the master's URL then runs
its jobs in an executor the worker starts, a JVM of its own: the tasks, the shuffles and the
Iceberg writes happen away from the driver, as on a real cluster (the warehouse is a local
directory both see). ``python -m duckstream.testing.spark_cluster DIR`` starts one and
prints its master URL until interrupted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Generator
from contextlib import contextmanager, suppress
from pathlib import Path

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def spark_home() -> Path:
    """The pyspark package's directory: Spark's jars and launchers (``bin/spark-class``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _alive_workers(web_port: int) -> int:
    """How many workers the master lists as alive (its JSON status page), 0 if not up."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{web_port}/json/", timeout=2) as page:
            return int(json.load(page).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@contextmanager
def standalone_cluster(
    directory: Path, *, cores: int = 1, memory: str = "1g", timeout: float = 120.0
) -> Generator[str]:
    """Start a master and one worker (``cores``, ``memory``) on loopback, logs and the
    worker's scratch space under ``directory``; yield the master URL (``spark://...``) once
    the worker has registered; stop both at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    launcher = home / "bin" / "spark-class"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise RuntimeError("a Spark cluster needs Java")
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOG_DIR": str(directory / "logs"),
        "SPARK_WORKER_DIR": str(directory / "work"),
        # lean daemons: they only schedule (the executor gets the worker's memory)
        "SPARK_DAEMON_MEMORY": "256m",
    }
    port, web_port = _free_port(), _free_port()
    url = f"spark://{HOST}:{port}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in (
            ("master", [MASTER, "--host", HOST, "--port", str(port)]),
            ("worker", [WORKER, url, "--host", HOST, "--cores", str(cores)]),
        ):
            extra = ["--webui-port", str(web_port)] if name == "master" else ["--webui-port", "0"]
            if name == "worker":
                extra += ["--memory", memory, "--work-dir", str(directory / "work")]
            log = (directory / f"{name}.log").open("wb")
            started.append(
                subprocess.Popen(
                    [str(launcher), *command, *extra],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stopped as one
                )
            )
        deadline = time.monotonic() + timeout
        while _alive_workers(web_port) < 1:
            for process in started:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"a Spark daemon exited ({process.returncode}): see {directory}/*.log"
                    )
            if time.monotonic() > deadline:
                raise TimeoutError(f"no worker registered in {timeout:.0f} s: see {directory}")
            time.sleep(0.5)
        yield url
    finally:
        for process in reversed(started):
            with suppress(ProcessLookupError):
                os.killpg(process.pid, 15)
        for process in reversed(started):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
                process.wait()


if __name__ == "__main__":
    with standalone_cluster(Path(sys.argv[1])) as master_url:
        print(master_url, flush=True)
        with suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
