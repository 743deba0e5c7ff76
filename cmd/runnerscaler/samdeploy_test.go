package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"
)

// The deploy commands of the docs and examples/samconfig.toml are parsed here
// as SAM CLI parses them, then checked against template.yaml's Parameters.
//
// SAM CLI is a Python program from a package registry that this project's
// machines and CI cannot reach, so it cannot be installed to run the commands
// for real. What follows is a port of its parameter-overrides grammar (the
// click parameter type CfnParameterOverridesType, with the option class that
// collects every word up to the next --option): each word, or each element of
// a samconfig list, is matched on its own, first against
// "ParameterKey=K,ParameterValue=V", else against " K=V"; a word where neither
// matches anything is refused ("is not a valid format"); the key is letters,
// digits and quotes; the value is a double-quoted or single-quoted string
// (backslash escapes inside), or an unquoted run of at least one character
// that is not a space, a double quote or a backslash. Wrapping quotes are then
// removed once, and \<space>, \" and \' unescaped.
//
// So `Key=` (what `Key=""` is once the shell took the quotes) is refused, and
// `Key=rate(1 minute)` in one word becomes Key=rate(1, the rest dropped in
// silence: SAM CLI's own grammar accepts it, so the port reports any text of a
// word that no pair matched, which SAM CLI would drop.

const (
	samKey = `([A-Za-z0-9"']+)`
	// samValue: the value of a space-delimited override.
	samValue = `("(?:\\.|[^"\\]+)*"|'(?:\\.|[^'\\]+)*'|(?:\\.|[^ "\\]+)+)`
)

var samPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?:ParameterKey=` + samKey + `,ParameterValue=` + samValue + `)`),
	regexp.MustCompile(`(?: )` + samKey + `=` + samValue),
}

// samUnquote removes one pair of wrapping quotes and unescapes what SAM CLI
// unescapes.
func samUnquote(s string) string {
	if len(s) > 0 && s[0] == s[len(s)-1] && (s[0] == '"' || s[0] == '\'') {
		if len(s) == 1 {
			s = ""
		} else {
			s = s[1 : len(s)-1]
		}
	}
	return strings.NewReplacer(`\ `, " ", `\"`, `"`, `\'`, "'").Replace(s)
}

// samParameterOverrides parses the values of --parameter-overrides (one per
// shell word, or per element of samconfig's list) as SAM CLI does. It fails
// where SAM CLI fails, and also on text SAM CLI would silently drop.
func samParameterOverrides(values []string) (map[string]string, error) {
	out := map[string]string{}
	if len(values) == 0 || (len(values) == 1 && values[0] == "") {
		return out, nil
	}
	for _, v := range values {
		if strings.HasPrefix(v, "file://") {
			return nil, fmt.Errorf("%s: file:// overrides are not ported", v)
		}
		normalized := " " + strings.TrimSpace(v)
		var matched bool
		for _, p := range samPatterns {
			found := p.FindAllStringSubmatchIndex(normalized, -1)
			if len(found) == 0 {
				continue
			}
			matched = true
			covered := make([]bool, len(normalized))
			for _, m := range found {
				for i := m[0]; i < m[1]; i++ {
					covered[i] = true
				}
				out[samUnquote(normalized[m[2]:m[3]])] = samUnquote(normalized[m[4]:m[5]])
			}
			var dropped strings.Builder
			for i, c := range []byte(normalized) {
				if !covered[i] {
					dropped.WriteByte(c)
				}
			}
			if d := strings.TrimSpace(dropped.String()); d != "" {
				return nil, fmt.Errorf("%s: SAM CLI would drop %q (quote a value with spaces for SAM CLI too: 'Key=\"a b\"')", v, d)
			}
			break
		}
		if !matched {
			return nil, fmt.Errorf("%s is not a valid format: SAM CLI refuses it (an empty value is Key=\"\" for SAM CLI, or leave the parameter out)", v)
		}
	}
	return out, nil
}

// TestSamParameterOverridesGrammar: the port behaves as SAM CLI on the cases
// the docs meet.
func TestSamParameterOverridesGrammar(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		words []string
		want  map[string]string // nil: refused
	}{
		{[]string{"A=1", "B=x,y"}, map[string]string{"A": "1", "B": "x,y"}},
		{[]string{"A=1 B=2"}, map[string]string{"A": "1", "B": "2"}},
		{[]string{"ParameterKey=A,ParameterValue=1"}, map[string]string{"A": "1"}},
		{[]string{`A="rate(1 minute)"`}, map[string]string{"A": "rate(1 minute)"}},
		{[]string{`A='rate(1 minute)'`}, map[string]string{"A": "rate(1 minute)"}},
		{[]string{`A=rate(1\ minute)`}, map[string]string{"A": "rate(1 minute)"}},
		{[]string{`A=""`}, map[string]string{"A": ""}},
		{[]string{"A=https://api.github.com/"}, map[string]string{"A": "https://api.github.com/"}},
		{[]string{"A="}, nil},
		{[]string{"A=1", "B="}, nil},
		{[]string{"A=rate(1 minute)"}, nil}, // SAM CLI: A=rate(1, "minute)" dropped
		{[]string{"just-a-word"}, nil},
	} {
		got, err := samParameterOverrides(c.words)
		switch {
		case c.want == nil && err == nil:
			t.Errorf("%q: parsed as %v, SAM CLI does not take it so", c.words, got)
		case c.want != nil && err != nil:
			t.Errorf("%q: %v", c.words, err)
		case c.want != nil && !equalMaps(got, c.want):
			t.Errorf("%q: got %v, want %v", c.words, got, c.want)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// cfnParameter is what template.yaml says of one stack parameter.
type cfnParameter struct {
	Type           string   `yaml:"Type"`
	Default        any      `yaml:"Default"`
	AllowedValues  []string `yaml:"AllowedValues"`
	AllowedPattern string   `yaml:"AllowedPattern"`
	MinValue       *float64 `yaml:"MinValue"`
	MaxValue       *float64 `yaml:"MaxValue"`
}

func templateParameters(t *testing.T) map[string]cfnParameter {
	t.Helper()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Parameters map[string]cfnParameter `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	if len(tpl.Parameters) < 10 {
		t.Fatalf("template.yaml: %d parameters read", len(tpl.Parameters))
	}
	return tpl.Parameters
}

// checkOverrides: every key is a parameter of the template, every value one
// CloudFormation takes for it, and every parameter without a default given.
func checkOverrides(params map[string]cfnParameter, got map[string]string) []string {
	var errs []string
	for key, value := range got {
		p, ok := params[key]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: template.yaml has no such parameter", key))
			continue
		}
		if len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, value) {
			errs = append(errs, fmt.Sprintf("%s=%s: not one of %v", key, value, p.AllowedValues))
		}
		if p.AllowedPattern != "" && !regexp.MustCompile(p.AllowedPattern).MatchString(value) {
			errs = append(errs, fmt.Sprintf("%s=%s: does not match %s", key, value, p.AllowedPattern))
		}
		if p.Type == "Number" {
			n, err := strconv.ParseFloat(value, 64)
			switch {
			case err != nil:
				errs = append(errs, fmt.Sprintf("%s=%s: not a number", key, value))
			case p.MinValue != nil && n < *p.MinValue, p.MaxValue != nil && n > *p.MaxValue:
				errs = append(errs, fmt.Sprintf("%s=%s: out of the template's range", key, value))
			}
		}
	}
	for key, p := range params {
		if _, given := got[key]; !given && p.Default == nil {
			errs = append(errs, fmt.Sprintf("%s: required (no default), not given", key))
		}
	}
	slices.Sort(errs)
	return errs
}

// TestDocSamDeployCommandsDeploy: every `sam deploy ... --parameter-overrides`
// of the docs parses as SAM CLI parses it (after the shell's quoting) and
// gives template.yaml's parameters values CloudFormation takes.
func TestDocSamDeployCommandsDeploy(t *testing.T) {
	t.Parallel()
	params := templateParameters(t)
	n := 0
	for _, file := range docFiles(t) {
		_, code := split(t, file)
		for _, l := range code {
			words := shellWords(strings.TrimSpace(l.text))
			if len(words) < 2 || words[0] != "sam" || words[1] != "deploy" {
				continue
			}
			i := slices.Index(words, "--parameter-overrides")
			if i < 0 {
				continue
			}
			var values []string
			for _, w := range words[i+1:] {
				if strings.HasPrefix(w, "--") {
					break
				}
				values = append(values, w)
			}
			n++
			got, err := samParameterOverrides(values)
			if err != nil {
				t.Errorf("%s:%d: %v", file, l.line, err)
				continue
			}
			for _, e := range checkOverrides(params, got) {
				t.Errorf("%s:%d: %s", file, l.line, e)
			}
		}
	}
	if n == 0 {
		t.Error("no sam deploy --parameter-overrides command in the docs: getting-started shows one")
	}
}

// TestExampleSamconfigDeploys: examples/samconfig.toml is read as SAM CLI
// reads it (TOML; a list of overrides is flattened and each element parsed on
// its own, a string parsed whole) and gives template.yaml's parameters values
// CloudFormation takes.
func TestExampleSamconfigDeploys(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../examples/samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Default struct {
			Deploy struct {
				Parameters map[string]any `toml:"parameters"`
			} `toml:"deploy"`
		} `toml:"default"`
	}
	if err := toml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("examples/samconfig.toml: %v", err)
	}
	deploy := cfg.Default.Deploy.Parameters
	var values []string
	switch v := deploy["parameter_overrides"].(type) {
	case string:
		values = []string{v}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				t.Fatalf("parameter_overrides: %v is not a string", e)
			}
			values = append(values, s)
		}
	default:
		t.Fatalf("examples/samconfig.toml: default.deploy.parameters.parameter_overrides is %T", v)
	}
	got, err := samParameterOverrides(values)
	if err != nil {
		t.Fatalf("examples/samconfig.toml: %v", err)
	}
	for _, e := range checkOverrides(templateParameters(t), got) {
		t.Errorf("examples/samconfig.toml: %s", e)
	}
}

// TestGettingStartedAnswersTheGuidedAuthPrompt: `sam deploy --guided` asks
// "<Function> has no authentication. Is this okay? [y/N]" for each function
// with an HTTP API event and no authorizer, and the default answer stops the
// deploy; getting-started names each such question and its answer.
func TestGettingStartedAnswersTheGuidedAuthPrompt(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Events map[string]struct {
					Type       string         `yaml:"Type"`
					Properties map[string]any `yaml:"Properties"`
				} `yaml:"Events"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	n := 0
	for name, r := range tpl.Resources {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		for _, e := range r.Properties.Events {
			if (e.Type != "HttpApi" && e.Type != "Api") || e.Properties["Auth"] != nil {
				continue
			}
			n++
			q := "`" + name + " has no authentication. Is this okay? [y/N]`: answer **y**"
			if !strings.Contains(text, q) {
				t.Errorf("docs/getting-started.md does not say %s", q)
			}
		}
	}
	if n == 0 {
		t.Error("template.yaml: no function with an HTTP API event and no authorizer; the webhook has one")
	}
}

// TestStepsGetTheCodeFirst: a reader following the README's quick start or
// getting-started meets the clone before the first command that needs the
// checkout, and the CLI's install before its first use.
func TestStepsGetTheCodeFirst(t *testing.T) {
	t.Parallel()
	needsCheckout := regexp.MustCompile(`(^|\s)(sam build|infra/|runner/|local/|\./cmd/)`)
	for _, file := range []string{"../../README.md", "../../docs/getting-started.md"} {
		_, code := split(t, file)
		cloned, installed := false, false
		for _, l := range code {
			line := strings.TrimSpace(l.text)
			if strings.HasPrefix(line, "git clone ") {
				cloned = true
			}
			if !cloned && needsCheckout.MatchString(line) {
				t.Errorf("%s:%d: %s: needs a checkout, and no git clone comes before", file, l.line, line)
			}
			if commandLine.MatchString(line) && !installed {
				t.Errorf("%s:%d: %s: the CLI is used before its install", file, l.line, line)
			}
			if strings.HasPrefix(line, "go install ") && strings.Contains(line, "cmd/runnerscaler") {
				installed = true
			}
		}
		if !cloned {
			t.Errorf("%s: no git clone", file)
		}
	}
}

// TestDocParameterValuesAreTheTemplates: a stack parameter the docs give a
// value inline (`CreateAccessEntry=false`) is one of template.yaml's, with a
// value CloudFormation takes for it.
func TestDocParameterValuesAreTheTemplates(t *testing.T) {
	t.Parallel()
	params := templateParameters(t)
	inline := regexp.MustCompile("`([A-Z][a-z]+[A-Za-z]*)=([^`\\s]*)`")
	n := 0
	for _, file := range userPages(t) {
		prose, _ := split(t, file)
		for _, l := range prose {
			for _, m := range inline.FindAllStringSubmatch(l.text, -1) {
				if m[1] == "Key" { // the grammar's placeholder
					continue
				}
				n++
				value := strings.Trim(m[2], `"`)
				if strings.ContainsAny(value, "<>") { // a placeholder
					value = ""
				}
				got := map[string]string{m[1]: value}
				for _, e := range checkOverrides(params, got) {
					if !strings.Contains(e, "required (no default)") && !(value == "" && strings.Contains(e, "not a number")) {
						t.Errorf("%s:%d: %s: %s", file, l.line, m[0], e)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Error("no inline parameter value in the docs; getting-started gives some")
	}
}
