-- Conversations on workers (docs/workers.md): the journal entries of the llm attempts workers
-- carry out, relayed to the run's coordinator, whose driver records them; the workers that are
-- up, so a coordinator knows whether any of them takes `llm` attempts; and each record's fence.
ALTER TABLE runner_attempts ADD COLUMN journaled boolean NOT NULL DEFAULT false;

-- One entry of a worker's journal: written under the attempt's claim, answered by the
-- coordinator once what it caused is recorded, and deleted by the worker when it takes the
-- answer (or with its attempt).
CREATE TABLE runner_journal (
    id          bigserial PRIMARY KEY,
    attempt_row bigint NOT NULL REFERENCES runner_attempts (id) ON DELETE CASCADE,
    claim       bigint NOT NULL,
    number      integer NOT NULL,
    run_id      text   NOT NULL,
    entry       text   NOT NULL,
    answer      text
);
-- A coordinator reads its run's unanswered entries.
CREATE INDEX runner_journal_open ON runner_journal (run_id, id) WHERE answer IS NULL;
-- An entry is the worker's `number`th under its claim: written again, it is found, not doubled.
CREATE UNIQUE INDEX runner_journal_entry ON runner_journal (attempt_row, claim, number);

-- The workers that are up: each renews its row while it runs and deletes it when it stops;
-- a row whose `seen_until` passed belongs to a worker that died.
CREATE TABLE runner_workers (
    id         text        PRIMARY KEY,
    runtimes   text[]      NOT NULL,
    seen_until timestamptz NOT NULL
);

-- The fence each record was written under (rows written before this migration have none): a
-- run's fences never go down along its records, which shows that no process wrote after
-- another took the run over.
ALTER TABLE runner_events ADD COLUMN fence bigint;
