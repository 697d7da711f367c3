"""`kirolearn doctor` on a real store: its checks, the last drain and the drain job."""

import json
import os

from conftest import cli


def test_doctor_reports_schedule_and_last_drain(home, filled):
    from kirolearn import health

    health.drain_finished(None)  # as `kirolearn drain` records it
    report = json.loads(cli("doctor", "--json").stdout)
    messages = " | ".join(c["message"] for c in report["checks"])
    assert "quick_check ok: 200 events" in messages
    assert "last drain" in messages and "succeeded" in messages
    assert "no systemd or launchd drain job" in messages or "no drain job" in messages
    from kirolearn.install import schedule

    service, timer = schedule.systemd_job(60)
    os.makedirs(os.path.dirname(timer.path))
    with open(timer.path, "w") as fh:
        fh.write(timer.content)
    report = json.loads(cli("doctor", "--json").stdout)
    assert any("drain job installed (systemd" in c["message"] for c in report["checks"])
