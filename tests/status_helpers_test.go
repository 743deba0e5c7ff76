package tests

import (
	"k8s.io/utils/clock"

	"github.com/runnerscaler/runnerscaler/internal/poolstate"
	"github.com/runnerscaler/runnerscaler/internal/redeliver"
	"github.com/runnerscaler/runnerscaler/internal/reservation"
	"github.com/runnerscaler/runnerscaler/internal/status/gather"
)

// gatherer is what `runnerscaler status` reads the world's deployment with.
func (w *world) gatherer(opts ...gather.Option) *gather.Gatherer {
	clk := clock.RealClock{}
	return gather.New(w.cfg, reservation.New(w.db, w.table, clk), poolstate.NewStore(w.db, w.table),
		redeliver.NewStore(w.db, w.table), w.kube, clk, opts...)
}
