package arcimport

import (
	"fmt"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/pool"
	"github.com/runnerscaler/runnerscaler/internal/poolcheck"
)

// Check runs on a pools file what `runnerscaler validate` runs, offline, which
// is what the sweeper checks when it starts (package poolcheck: the load, then
// every pool's template). A file the sweeper refuses stops every pool, so the
// import writes none.
func Check(raw []byte) (*pool.Config, error) {
	if problems := poolcheck.Check(raw); len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.Error()
		}
		// One line: the reason is written as a comment of the output file.
		return nil, fmt.Errorf("the sweeper's checks (runnerscaler validate) refuse it: %s", strings.Join(msgs, "; "))
	}
	cfg, err := pool.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("the sweeper's load refuses it: %w", err)
	}
	return cfg, nil
}

// checked keeps the drafts whose pool, alone in a file, passes Check; each
// other is left out and listed with the check's error. The import carries
// what it knows the sweeper refuses in another form or lists it; this is the
// guarantee for what it does not foresee.
func (c *converter) checked(drafts []*draft) ([]*draft, error) {
	var kept []*draft
	for _, dr := range drafts {
		raw, err := render([]*draft{dr})
		if err != nil {
			return nil, err
		}
		if _, err := Check(raw); err != nil {
			c.drop(dr.src, "", fmt.Sprintf("%s: its pool %s is left out: %v", dr.src.ref(), dr.name, err),
				"change the field the check names in the manifest (kubernetes.template is the runner pod's template) and import again")
			continue
		}
		kept = append(kept, dr)
	}
	return kept, nil
}
