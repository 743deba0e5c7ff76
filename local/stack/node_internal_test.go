package stack

import (
	"strings"
	"testing"
)

func TestUnescapeMount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`/tmp/a`:              "/tmp/a",
		`/tmp/with\040space`:  "/tmp/with space",
		`/tmp/tab\011and\134`: "/tmp/tab\tand\\",
		`/tmp/trailing\04`:    `/tmp/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNetwork checks that stacks side by side get their own bridge, within the
// kernel's 15-character limit on interface names, and a 10.244.x.0/24 range.
func TestNetwork(t *testing.T) {
	t.Parallel()
	name1, bridge1, subnet1 := node{"/tmp/stack-a"}.network()
	name2, bridge2, _ := node{"/tmp/stack-b"}.network()
	if name1 == name2 || bridge1 == bridge2 {
		t.Errorf("two stacks share network %s / bridge %s", name1, bridge1)
	}
	if len(bridge1) > 15 {
		t.Errorf("bridge name %q is longer than 15 characters", bridge1)
	}
	if !strings.HasPrefix(subnet1, "10.244.") || !strings.HasSuffix(subnet1, ".0/24") {
		t.Errorf("subnet %q, want 10.244.x.0/24", subnet1)
	}
}
