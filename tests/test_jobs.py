"""Specification of dlm_lsp.jobs: newest request wins, edits and closes stop the rest."""

from __future__ import annotations

import pytest

from dlm_lsp.jobs import (
    CLIENT_CANCELLED,
    DOCUMENT_CHANGED,
    DOCUMENT_CLOSED,
    SUPERSEDED,
    TIMED_OUT,
    Job,
    Jobs,
    Kind,
)

A, B = "file:///a.py", "file:///b.py"


def test_a_new_job_is_running_and_counted() -> None:
    jobs = Jobs()
    job = jobs.start(A, 3)
    assert (job.uri, job.version, job.reason) == (A, 3, "")
    assert not job.stopped()
    assert jobs.in_flight() == 1


def test_starting_a_job_supersedes_older_jobs_for_the_same_document() -> None:
    jobs = Jobs()
    first, second = jobs.start(A, 1), jobs.start(A, 1)
    third = jobs.start(A, 2)
    assert first.stopped() and second.stopped()
    assert first.reason == second.reason == SUPERSEDED
    assert not third.stopped()


def test_a_command_is_not_superseded_but_still_stops_on_an_edit() -> None:
    jobs = Jobs()
    command = jobs.start(A, 1, Kind.COMMAND)
    suggestion = jobs.start(A, 1)
    jobs.start(A, 1)
    assert not command.stopped() and suggestion.reason == SUPERSEDED
    jobs.stop_document(A, DOCUMENT_CHANGED)
    assert command.reason == DOCUMENT_CHANGED


def test_a_suggestion_supersedes_only_suggestions() -> None:
    """Ghost text asked for after a keystroke does not stop the fill the user asked for
    (`dlm/infill`) just before; that fill, and a newer one, stop the older suggestions."""
    jobs = Jobs()
    ghost = jobs.start(A, 1, Kind.SUGGESTION)
    asked = jobs.start(A, 1)
    assert ghost.reason == SUPERSEDED
    later_ghost = jobs.start(A, 1, Kind.SUGGESTION)
    assert not asked.stopped()
    asked_again = jobs.start(A, 1)
    assert asked.reason == later_ghost.reason == SUPERSEDED and not asked_again.stopped()


@pytest.mark.parametrize(("newer", "older", "stops"), [
    (Kind.SUGGESTION, Kind.SUGGESTION, True),
    (Kind.SUGGESTION, Kind.FILL, False),
    (Kind.SUGGESTION, Kind.COMMAND, False),
    (Kind.FILL, Kind.SUGGESTION, True),
    (Kind.FILL, Kind.FILL, True),
    (Kind.FILL, Kind.COMMAND, False),
    (Kind.COMMAND, Kind.SUGGESTION, True),
    (Kind.COMMAND, Kind.FILL, True),
    (Kind.COMMAND, Kind.COMMAND, False),
])
def test_what_a_newer_fill_of_each_kind_stops(newer: Kind, older: Kind, stops: bool) -> None:
    jobs = Jobs()
    old = jobs.start(A, 1, older)
    jobs.start(A, 1, newer)
    assert old.stopped() is stops


def test_starting_a_job_leaves_other_documents_jobs_running() -> None:
    jobs = Jobs()
    other = jobs.start(B, 1)
    jobs.start(A, 1)
    assert not other.stopped() and other.reason == ""


def test_superseded_jobs_stay_in_flight_until_they_finish() -> None:
    jobs = Jobs()
    old = jobs.start(A, 1)
    new = jobs.start(A, 1)
    assert jobs.in_flight() == 2
    jobs.finish(old)
    assert jobs.in_flight() == 1
    jobs.finish(new)
    assert jobs.in_flight() == 0


def test_stop_keeps_the_first_reason() -> None:
    job = Job(A, 1)
    job.stop(CLIENT_CANCELLED)
    job.stop(TIMED_OUT)
    assert job.stopped() and job.reason == CLIENT_CANCELLED


def test_a_superseded_job_keeps_its_reason_when_its_document_closes() -> None:
    jobs = Jobs()
    old = jobs.start(A, 1)
    jobs.start(A, 1)
    jobs.stop_document(A, DOCUMENT_CLOSED)
    assert old.reason == SUPERSEDED


def test_finish_forgets_the_job() -> None:
    jobs = Jobs()
    job = jobs.start(A, 1)
    jobs.finish(job)
    assert jobs.in_flight() == 0
    jobs.stop_document(A, DOCUMENT_CHANGED)  # a finished job is no longer reachable
    assert not job.stopped()


def test_finish_is_harmless_twice_or_for_an_unknown_job() -> None:
    jobs = Jobs()
    job = jobs.start(A, 1)
    jobs.finish(job)
    jobs.finish(job)
    jobs.finish(Job(B, None))
    assert jobs.in_flight() == 0


def test_a_finished_job_does_not_stop_later_jobs() -> None:
    jobs = Jobs()
    jobs.finish(jobs.start(A, 1))
    later = jobs.start(A, 2)
    assert not later.stopped()


def test_stop_document_stops_every_job_of_that_document_only() -> None:
    jobs = Jobs()
    b_old, a, b_new = jobs.start(B, 1), jobs.start(A, 1), jobs.start(B, 1)
    jobs.stop_document(B, DOCUMENT_CHANGED)
    assert b_old.stopped() and b_new.stopped()
    assert b_new.reason == DOCUMENT_CHANGED
    assert not a.stopped()


def test_stop_document_without_jobs_does_nothing() -> None:
    jobs = Jobs()
    jobs.stop_document(A, DOCUMENT_CLOSED)
    assert jobs.in_flight() == 0


@pytest.mark.parametrize("first", [SUPERSEDED, CLIENT_CANCELLED, TIMED_OUT])
def test_a_job_stopped_for_another_reason_is_still_stale_once_its_document_changes(first):
    """Its result, if it comes all the same, is for text the editor no longer has."""
    job = Job(A, 1)
    job.stop(first)
    job.stop(DOCUMENT_CHANGED)
    assert job.stale and job.reason == first and job.changed == DOCUMENT_CHANGED
