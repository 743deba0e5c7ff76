package main

import (
	"errors"
	"strings"
	"testing"
)

func TestStatusFlags(t *testing.T) {
	t.Parallel()
	env := func(k string) string { return map[string]string{"RUNNERSCALER_TABLE": "from-env"}[k] }
	f, err := parseStatus([]string{"linux", "-o", "json"}, env)
	if err != nil || f.pool != "linux" || f.output.String() != "json" || f.table != "from-env" {
		t.Fatalf("status linux -o json = %+v, %v", f, err)
	}
	if f, err = parseStatus([]string{"--job", "42", "-table", "t", "-o", "yaml"}, env); err != nil || f.job != 42 || f.table != "t" || f.output.String() != "yaml" {
		t.Fatalf("status --job 42 = %+v, %v", f, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--table is required"},
		{[]string{"-table", "t", "-o", "xml"}, `invalid value "xml" for flag -o: want table, json, yaml`},
		{[]string{"-table", "t", "--job", "abc"}, `--job "abc": want a workflow job id`},
		{[]string{"-table", "t", "--job", "-3"}, `--job "-3"`},
		{[]string{"-table", "t", "a", "b"}, `one POOL at most`},
		{[]string{"-table", "t", "a", "--job", "1"}, "either POOL or --job"},
		{[]string{"-table", "t", "--nope"}, "unknown flag --nope"},
	} {
		_, err := parseStatus(c.args, func(string) string { return "" })
		var usage *usageError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &usage) {
			t.Errorf("status %q: error %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
}
