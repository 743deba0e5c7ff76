package teardown

import (
	"fmt"
	"slices"
	"strings"

	"github.com/runnerscaler/runnerscaler/internal/sweepevent"
)

// DrainEntry is what to invoke to drain the sweeper function: the function
// (its name, partial ARN ACCOUNT:function:NAME or ARN) qualified with its drain
// alias, the only entry through which the deployed sweeper serves a drain
// command. A function already qualified with that alias is returned as it is;
// one qualified otherwise is an error.
func DrainEntry(function string) (string, error) {
	parts := strings.Split(function, ":")
	if slices.Contains(parts, "") {
		return "", fmt.Errorf("function %q: want a function name or ARN", function)
	}
	unqualified := 1 // NAME
	switch {
	case strings.HasPrefix(function, "arn:"):
		unqualified = 7 // arn:PARTITION:lambda:REGION:ACCOUNT:function:NAME
	case len(parts) >= 3 && parts[1] == "function":
		unqualified = 3 // ACCOUNT:function:NAME
	}
	switch len(parts) {
	case unqualified:
		return function + ":" + sweepevent.DrainAlias, nil
	case unqualified + 1:
		if parts[unqualified] == sweepevent.DrainAlias {
			return function, nil
		}
		return "", fmt.Errorf("function %q is qualified with %q: the sweeper drains only through its %q alias",
			function, parts[unqualified], sweepevent.DrainAlias)
	}
	return "", fmt.Errorf("function %q: want a function name or ARN", function)
}
