package arcimport

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

var notNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// names gives each draft its pool name: the ARC object's name, made a DNS-1123
// label of at most pool.MaxNameLength characters, unique in the file. A
// RunnerSet's pool gets the suffix -pool: ARC names a RunnerSet's runners
// `<runnerset>-xxxxx-0`, the shape of runnerscaler's `<pool>-xxxxx-0`, and the
// two must never share a name. Every derived name is said in the pool's
// comment and in a note.
func names(c *converter, drafts []*draft) {
	taken := map[string]bool{}
	for _, dr := range drafts {
		d := dr.src
		base, why := d.name, ""
		if dr.poolBase != "" {
			base = dr.poolBase
		}
		if base == "" {
			base, why = dr.poolScope().Name(), "it has no metadata.name: named after its scope"
		}
		name := sanitize(base)
		if name != base && why == "" {
			why = fmt.Sprintf("%q is not a DNS-1123 label", base)
		}
		if d.kind == kindRunnerSet {
			name += "-pool"
			why = "a RunnerSet's runners are named <runnerset>-xxxxx-0, like a pool's: suffixed -pool so that none share a name"
		}
		if short := shorten(name, pool.MaxNameLength); short != name {
			why = strings.TrimPrefix(why+"; ", "; ") + fmt.Sprintf("shortened to %d characters", pool.MaxNameLength)
			name = short
		}
		unique := name
		for i := 2; taken[unique]; i++ {
			suffix := fmt.Sprintf("-%d", i)
			unique = shorten(name, pool.MaxNameLength-len(suffix)) + suffix
		}
		if unique != name {
			why = strings.TrimPrefix(why+"; ", "; ") + fmt.Sprintf("%q is taken by another pool of this file", name)
		}
		taken[unique] = true
		dr.name = unique
		dr.comments = append(dr.comments, sources(dr)...)
		if why != "" {
			dr.comments = append(dr.comments, "pool name "+unique+": "+why)
			c.note(d, "pool %s: %s", unique, why)
		}
	}
}

// sanitize lower-cases v and turns what a DNS-1123 label cannot hold into '-'.
func sanitize(v string) string {
	s := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(v), "-"), "-")
	if s == "" {
		return "arc"
	}
	return s
}

// shorten keeps name within limit characters: a prefix and a hash of the
// whole name, so that two long names with one prefix stay apart.
func shorten(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	suffix := fmt.Sprintf("-%05x", h.Sum32()&0xfffff)
	return strings.TrimRight(name[:limit-len(suffix)], "-") + suffix
}

func sources(dr *draft) []string {
	out := []string{fmt.Sprintf("from %s, document %d: %s", dr.src.file, dr.src.doc, dr.src.ref())}
	if dr.hra != nil {
		out = append(out, fmt.Sprintf("scaled as %s, document %d: %s", dr.hra.file, dr.hra.doc, dr.hra.ref()))
	}
	return out
}
