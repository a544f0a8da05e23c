package raft

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	leaderChanges      prometheus.Counter
	proposalsDropped   prometheus.Counter
	proposalsFailed    prometheus.Counter
	droppedFromRemoved prometheus.Counter
	snapshots          prometheus.Counter
	snapshotFileBytes  prometheus.Counter
	applied            prometheus.Gauge
	syncDuration       prometheus.Histogram
	proposeDuration    prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_raft_leader_changes_total", Help: "Leader changes seen by this member."}),
		proposalsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_raft_proposals_dropped_total", Help: "Proposals raft dropped (no leader); they are retried."}),
		proposalsFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_raft_proposals_failed_total", Help: "Proposals whose deadline passed before they were applied."}),
		droppedFromRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_raft_messages_from_removed_total", Help: "Messages dropped because they came from a removed member."}),
		snapshots: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_raft_snapshots_total", Help: "Snapshots taken by this member."}),
		snapshotFileBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_raft_snapshot_file_bytes_total",
			Help: "Bytes of snapshots written to files by this member: its own and those received from the leader."}),
		applied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "isle_raft_applied_index", Help: "Index of the last entry applied to the state machine."}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "isle_raft_wal_sync_seconds", Help: "Time to persist one Ready with fsync.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		proposeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "isle_raft_propose_seconds", Help: "Time from proposal to local apply.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	if reg != nil {
		reg.MustRegister(m.leaderChanges, m.proposalsDropped, m.proposalsFailed, m.droppedFromRemoved,
			m.snapshots, m.snapshotFileBytes, m.applied, m.syncDuration, m.proposeDuration)
	}
	return m
}
