// Package suggest finds the known name a misspelt one was most likely meant to
// be, for the "did you mean" of an error about an unknown field.
package suggest

import "strings"

// Closest returns the candidate nearest to name by edit distance (ignoring
// case), or "" when none is near enough to be a plausible typo: 2 edits apart,
// or a third of a long name's letters, and never more than 3.
func Closest(name string, candidates []string) string {
	limit := min(3, max(2, len(name)/3))
	best, bestDistance := "", limit+1
	for _, c := range candidates {
		if d := distance(strings.ToLower(name), strings.ToLower(c)); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
