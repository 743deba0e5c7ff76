package pool_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// TestExampleDocumentsEveryField: infra/pools.example.yaml loads and shows every
// field a pool file takes (each yaml key of the pool types), so none is missing
// from the documentation.
func TestExampleDocumentsEveryField(t *testing.T) {
	t.Parallel()
	const path = "../../infra/pools.example.yaml"
	if _, err := pool.Load(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []any{pool.Pool{}, pool.ScaleUpTrigger{}, pool.ScheduledOverride{}, pool.RecurrenceRule{}, pool.Kubernetes{},
		pool.Headroom{}, pool.HeadroomOverride{}} {
		rt := reflect.TypeOf(typ)
		for i := range rt.NumField() {
			key, _, _ := strings.Cut(rt.Field(i).Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			if !regexp.MustCompile(`[\s{,]` + regexp.QuoteMeta(key) + `:`).Match(raw) {
				t.Errorf("%s.%s (%s) is not in %s", rt.Name(), rt.Field(i).Name, key, path)
			}
		}
	}
}
