package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cacheblend/cacheblend/bindings/go/cacheblend"
)

// job is one ingest request (uploaded files or the --docs folder), run in the background so the
// page can show its progress.
type job struct {
	ID         int64      `json:"id"`
	State      string     `json:"state"` // "queued", "running", "done" or "failed"
	Paths      []string   `json:"paths"`
	Collection string     `json:"collection,omitempty"`
	Phase      string     `json:"phase,omitempty"` // the library's progress phase
	Done       int64      `json:"done"`
	Total      int64      `json:"total"`
	Current    string     `json:"current,omitempty"`
	Skipped    []skipped  `json:"skipped,omitempty"`
	Report     *jobReport `json:"report,omitempty"`
	Error      string     `json:"error,omitempty"`
	Started    time.Time  `json:"started"`
	Finished   *time.Time `json:"finished,omitempty"`
}

type skipped struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// jobReport sums the ingest reports of a job's paths.
type jobReport struct {
	Added     int64    `json:"added"`
	Updated   int64    `json:"updated"`
	Unchanged int64    `json:"unchanged"`
	Skipped   int64    `json:"skipped"`
	Chunks    int64    `json:"chunks_added"`
	Notices   []string `json:"notices,omitempty"`
}

// jobQueue runs ingest jobs one after another on one goroutine: the runtime serializes ingests
// anyway, and one at a time keeps each job's progress meaningful.
type jobQueue struct {
	rt     *cacheblend.Runtime
	mu     sync.Mutex
	nextID int64
	jobs   []*job // newest last; the oldest finished ones are dropped past keepJobs
	work   chan *job
}

const keepJobs = 50

func newJobQueue(rt *cacheblend.Runtime) *jobQueue {
	return &jobQueue{rt: rt, work: make(chan *job, 64)}
}

// submit queues an ingest of paths; it fails when the queue is full.
func (q *jobQueue) submit(paths []string, collection string) (*job, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	j := &job{ID: q.nextID, State: "queued", Paths: paths, Collection: collection, Started: time.Now()}
	select {
	case q.work <- j:
	default:
		return nil, fmt.Errorf("%d ingests are queued already; try again later", cap(q.work))
	}
	q.jobs = append(q.jobs, j)
	if len(q.jobs) > keepJobs && q.jobs[0].Finished != nil {
		q.jobs = q.jobs[1:]
	}
	return j, nil
}

// run works through the queue until ctx ends (shutdown), which also aborts the running ingest.
func (q *jobQueue) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-q.work:
			q.runJob(ctx, j)
		}
	}
}

func (q *jobQueue) runJob(ctx context.Context, j *job) {
	q.update(j, func(j *job) { j.State = "running" })
	total := &jobReport{}
	opts := &cacheblend.IngestOptions{Collection: j.Collection, Progress: func(p cacheblend.Progress) bool {
		q.update(j, func(j *job) { j.progress(p, total) })
		return true
	}}
	var firstErr error
	for _, path := range j.Paths {
		rep, err := q.rt.IngestPath(ctx, path, opts)
		total.Added += rep.Added
		total.Updated += rep.Updated
		total.Unchanged += rep.Unchanged
		total.Skipped += rep.Skipped
		total.Chunks += rep.ChunksAdded
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	q.update(j, func(j *job) {
		now := time.Now()
		j.Finished, j.Report, j.State = &now, total, "done"
		if firstErr != nil {
			j.State, j.Error = "failed", firstErr.Error()
		}
	})
}

// progress records one progress report.
func (j *job) progress(p cacheblend.Progress, rep *jobReport) {
	switch p.Phase {
	case "skip":
		j.Skipped = append(j.Skipped, skipped{File: p.Current, Reason: p.Message})
	case "notice":
		rep.Notices = append(rep.Notices, p.Message)
	default:
		j.Phase, j.Done, j.Total, j.Current = p.Phase, p.Done, p.Total, p.Current
	}
}

func (q *jobQueue) update(j *job, fn func(*job)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fn(j)
}

// snapshot copies the jobs (newest first), or the one with id when id > 0.
func (q *jobQueue) snapshot(id int64) []job {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := []job{}
	for i := len(q.jobs) - 1; i >= 0; i-- {
		if id == 0 || q.jobs[i].ID == id {
			j := *q.jobs[i]
			j.Skipped = append([]skipped(nil), j.Skipped...)
			out = append(out, j)
		}
	}
	return out
}
