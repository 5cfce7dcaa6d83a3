"""A streaming replica of the embedded PostgreSQL, on this machine: ``pg_basebackup -R`` of the
running server into a directory of its own, started on another port (a Unix socket in that
directory, like the primary's). Used by tests/tenancy/test_replicas.py and
benchmarks/replicas.py."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg

from memoryconsole import embedded

PORT = 5433  # a socket file in the replica's own directory: never collides with the primary


@dataclass
class ReplicaServer:
    primary: Path  # the primary's data directory, where it listens
    pgdata: Path
    bindir: Path
    run_as: dict[str, Any]

    @classmethod
    def make(cls, home: Path, name: str) -> ReplicaServer:
        """Copy the running embedded server under ``home`` into ``home/name`` and start it as
        a hot standby streaming from it."""
        primary = embedded.pgdata_dir(home).resolve()
        postmaster = psutil.Process(int((primary / "postmaster.pid").read_text().split()[0]))
        owner = postmaster.username()
        # pgserver runs PostgreSQL as its own user when started by root; the copy must be
        # that user's too.
        run_as = {"user": owner} if os.geteuid() == 0 and owner != "root" else {}
        pgdata = home / name
        shutil.rmtree(pgdata, ignore_errors=True)
        pgdata.mkdir(mode=0o700)
        if run_as:
            account = pwd.getpwnam(owner)
            os.chown(pgdata, account.pw_uid, account.pw_gid)
        server = cls(primary, pgdata, Path(postmaster.exe()).parent, run_as)
        server._run(
            "pg_basebackup",
            *("-h", str(primary), "-U", embedded.SUPERUSER, "-D", str(pgdata)),
            *("-R", "-X", "stream", "-c", "fast"),
        )
        server.start()
        return server

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self.bindir / program), *args],
            check=True,
            capture_output=True,
            timeout=120,
            **self.run_as,
        )

    @property
    def host(self) -> str:
        return str(self.pgdata)

    def start(self) -> None:
        options = f"-p {PORT} -k {self.pgdata} -h '' -c shared_buffers=128MB"
        log = str(self.pgdata / "replica.log")
        self._run("pg_ctl", "start", "-w", "-D", str(self.pgdata), "-l", log, "-o", options)

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "stop", "-w", "-m", mode, "-D", str(self.pgdata))

    def remove(self) -> None:
        if (self.pgdata / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.pgdata, ignore_errors=True)

    def superuser(self, dbname: str = "postgres") -> Any:
        return psycopg.connect(
            host=self.host, port=PORT, user=embedded.SUPERUSER, dbname=dbname, autocommit=True
        )

    def pause(self) -> None:
        with self.superuser() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        with self.superuser() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def caught_up(self, timeout: float = 30.0) -> None:
        """Wait until the replica has replayed everything the primary has written so far."""
        with psycopg.connect(
            host=str(self.primary), user=embedded.SUPERUSER, dbname="postgres", autocommit=True
        ) as primary:
            target = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        deadline = time.monotonic() + timeout
        with self.superuser() as conn:
            while not conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]
            ).fetchone()[0]:  # type: ignore[index]
                assert time.monotonic() < deadline, f"the replica replayed {target} in {timeout}s"
                time.sleep(0.05)
