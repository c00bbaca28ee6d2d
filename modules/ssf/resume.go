package ssf

import (
	"context"
	"encoding/json"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// A push job whose instance dies (kill -9, a lost node) stays "running"
// in River until its rescuer looks, an hour past the job's timeout; were it
// a stream's only job, the stream's pending SETs would wait that long. The
// resume job, which River's leader runs at its start and then every
// ResumeEvery, starts a push job for every enabled push stream that holds
// pending SETs and has none queued. Such a job waits for a lease it finds
// held, which may be a dead job's, and pushes the stream once it runs out;
// a stream waiting out a backoff has its job queued, and keeps it.

type resumeArgs struct{}

func (resumeArgs) Kind() string { return "flowd.ssf_resume" }

type resumeWorker struct {
	river.WorkerDefaults[resumeArgs]
	m *Module
}

// queuedStates are the states of a job that will still run.
var queuedStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled}

// Work starts the push of each backlogged stream that no job will push.
func (w *resumeWorker) Work(ctx context.Context, _ *river.Job[resumeArgs]) error {
	m := w.m
	backlogged, err := store.Backlogged(ctx, m.workers)
	if err != nil || len(backlogged) == 0 {
		return err
	}
	queued, err := m.queuedStreams(ctx)
	if err != nil {
		return err
	}
	var params []river.InsertManyParams
	for _, s := range backlogged {
		if !queued[s.ID] {
			params = append(params, river.InsertManyParams{Args: pushArgs{OrganizationID: s.OrganizationID, StreamID: s.ID, Resume: true},
				InsertOpts: &river.InsertOpts{Queue: pushQueue}})
		}
	}
	if len(params) == 0 {
		return nil
	}
	m.log.InfoContext(ctx, "ssf: resuming the push of streams no job pushes", "streams", len(params))
	_, err = m.river.InsertMany(ctx, params)
	return err
}

// queuedStreams returns the streams that a push job waits to push.
func (m *Module) queuedStreams(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	params := river.NewJobListParams().Kinds(pushArgs{}.Kind()).States(queuedStates...).First(1000)
	for {
		res, err := m.river.JobList(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, j := range res.Jobs {
			var a pushArgs
			if json.Unmarshal(j.EncodedArgs, &a) == nil {
				out[a.StreamID] = true
			}
		}
		if len(res.Jobs) < 1000 {
			return out, nil
		}
		params = params.After(res.LastCursor)
	}
}

// resumeJob is the periodic job that runs the resume worker.
func resumeJob(every time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(every), func() (river.JobArgs, *river.InsertOpts) {
		return resumeArgs{}, &river.InsertOpts{Queue: pushQueue, MaxAttempts: 1}
	}, &river.PeriodicJobOpts{ID: "ssf-resume", RunOnStart: true})
}
