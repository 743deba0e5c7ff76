package main

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/runnerscaler/runnerscaler/internal/pool"
)

// docFiles are the documentation the tests keep true: the README, the pages
// under docs/ and examples/, and the contributors' pages.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../../README.md", "../../CONTRIBUTING.md", "../../CHANGELOG.md"}
	for _, dir := range []string{"../../docs", "../../examples"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	// commandLine is a line of a code block that runs the CLI.
	commandLine = regexp.MustCompile(`^(?:\$ )?(?:go run \./cmd/)?runnerscaler(?:\s|$)`)
)

// TestDocLinksResolve: every relative link of the docs names a file or
// directory that exists, and a #fragment names a heading of its page.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	for _, file := range docFiles(t) {
		prose, _ := split(t, file)
		for _, l := range prose {
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(l.text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(resolved); err != nil {
						t.Errorf("%s:%d: link %s: no such file", file, l.line, target)
						continue
					}
				}
				if anchor != "" && !hasAnchor(t, resolved, anchor) {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", file, l.line, target, resolved, anchor)
				}
			}
		}
	}
}

// TestDocCommandsParse: every `runnerscaler ...` command line in the docs'
// code blocks parses with the CLI's own flags.
func TestDocCommandsParse(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "from-the-environment" }
	n := 0
	for _, file := range docFiles(t) {
		_, code := split(t, file)
		for _, l := range code {
			line := strings.TrimSpace(l.text)
			if !commandLine.MatchString(line) {
				continue
			}
			args := shellWords(line)
			for i, a := range args {
				if a == "runnerscaler" || strings.HasSuffix(a, "/runnerscaler") {
					args = args[i+1:]
					break
				}
			}
			n++
			if err := parseCommandLine(args, env); err != nil {
				t.Errorf("%s:%d: %s: %v", file, l.line, line, err)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d command lines found in the docs, want the ones the CLI reference shows", n)
	}
}

type docLine struct {
	line int
	text string
}

// split returns a Markdown file's prose lines and its code blocks' lines, the
// latter with their continuations (a trailing \) joined.
func split(t *testing.T, file string) (prose, code []docLine) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	fenced, n := false, 0
	var pending *docLine
	for s.Scan() {
		n++
		text := s.Text()
		if strings.HasPrefix(strings.TrimSpace(text), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose = append(prose, docLine{n, text})
			continue
		}
		if pending != nil {
			pending.text += " " + strings.TrimSpace(text)
		} else {
			pending = &docLine{n, text}
		}
		if strings.HasSuffix(pending.text, "\\") {
			pending.text = strings.TrimSuffix(pending.text, "\\")
			continue
		}
		code = append(code, *pending)
		pending = nil
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return prose, code
}

// hasAnchor reports whether the Markdown file has a heading whose GitHub
// anchor is anchor.
func hasAnchor(t *testing.T, file, anchor string) bool {
	t.Helper()
	prose, _ := split(t, file)
	seen := map[string]int{}
	for _, l := range prose {
		if !strings.HasPrefix(l.text, "#") {
			continue
		}
		slug := slugify(strings.TrimLeft(l.text, "# "))
		if k := seen[slug]; k > 0 {
			seen[slug]++
			slug += "-" + string(rune('0'+k))
		} else {
			seen[slug] = 1
		}
		if slug == anchor {
			return true
		}
	}
	return false
}

// slugify is GitHub's anchor of a heading: lower case, punctuation dropped,
// spaces as hyphens.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// shellWords splits a command line as a shell would, for the simple lines of
// the docs: quotes group, a # starts a comment.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return append(words, cur.String())[:len(words)]
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// userPages are the pages for the people who deploy and run runnerscaler:
// the README, docs/ (not docs/design/, the contributors' decision records)
// and examples/.
func userPages(t *testing.T) []string {
	t.Helper()
	var pages []string
	for _, f := range docFiles(t) {
		if strings.Contains(f, "CONTRIBUTING") || strings.Contains(f, "CHANGELOG") || strings.Contains(f, "/docs/design/") {
			continue
		}
		pages = append(pages, f)
	}
	return pages
}

// headingText is a heading's text as a reader quotes it: no #, no backticks.
func headingText(line string) string {
	return strings.ReplaceAll(strings.TrimSpace(strings.TrimLeft(line, "#")), "`", "")
}

var (
	quoted = regexp.MustCompile(`"([^"]+)"`)
	// seeQuoted is a pointer by a title in quotes, to a heading or to none.
	seeQuoted = regexp.MustCompile(`\b[Ss]ee "([^"]+)"`)
)

// TestDocCrossReferencesAreLinks: a user page names another section by a link,
// not by its title in quotes ("see "Re-runs""), which no test can keep true
// when the heading changes.
func TestDocCrossReferencesAreLinks(t *testing.T) {
	t.Parallel()
	headings := map[string]string{} // heading text -> page#anchor
	for _, file := range userPages(t) {
		prose, _ := split(t, file)
		for _, l := range prose {
			if strings.HasPrefix(l.text, "#") {
				headings[headingText(l.text)] = filepath.Base(file) + "#" + slugify(strings.TrimLeft(l.text, "# "))
			}
		}
	}
	section := func(quote string) (string, bool) {
		for text, target := range headings {
			// the heading, or its first words ("Removing pools" of "Removing pools, and ...")
			if text == quote || strings.Count(quote, " ") > 0 && strings.HasPrefix(text, quote+",") {
				return target, true
			}
		}
		return "", false
	}
	for _, file := range userPages(t) {
		for _, para := range paragraphs(t, file) {
			text := inlineCode.ReplaceAllString(para.text, "")
			for _, m := range quoted.FindAllStringSubmatch(text, -1) {
				if target, ok := section(m[1]); ok {
					t.Errorf("%s:%d: %s names a section in quotes: link it, [%s](%s)", file, para.line, m[0], m[1], target)
				}
			}
			for _, m := range seeQuoted.FindAllStringSubmatch(text, -1) {
				if _, ok := section(m[1]); !ok {
					t.Errorf("%s:%d: see %q: no such heading; link the section that says it", file, para.line, m[1])
				}
			}
		}
	}
}

// paragraphs are a page's prose paragraphs (headings apart), each one line,
// at the line it begins.
func paragraphs(t *testing.T, file string) []docLine {
	t.Helper()
	prose, _ := split(t, file)
	var out []docLine
	var cur *docLine
	for _, l := range prose {
		switch {
		case strings.TrimSpace(l.text) == "" || strings.HasPrefix(l.text, "#"):
			cur = nil
		case cur == nil:
			out = append(out, docLine{l.line, l.text})
			cur = &out[len(out)-1]
		default:
			cur.text += " " + strings.TrimSpace(l.text)
		}
	}
	return out
}

// TestRepositoryPointersResolve: the pointers to the docs that reach users
// outside the docs — alarm descriptions in template.yaml (sent to the alarm
// topic's subscribers) and import-arc's messages — name a page that exists
// and a heading it has, never a section by its title alone.
func TestRepositoryPointersResolve(t *testing.T) {
	t.Parallel()
	pointer := regexp.MustCompile(`docs/[a-z0-9-]+\.md(#[a-z0-9-]+)?`)
	stale := regexp.MustCompile(`README "|\(see [A-Z][^)]*\)`)
	files := []string{"../../template.yaml"}
	sources, err := filepath.Glob("../../internal/arcimport/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sources {
		if !strings.HasSuffix(f, "_test.go") {
			files = append(files, f)
		}
	}
	n := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if m := stale.FindString(line); m != "" {
				t.Errorf("%s:%d: %q points at a section by its title: name docs/PAGE.md#anchor", file, i+1, m)
			}
			for _, p := range pointer.FindAllString(line, -1) {
				n++
				page, anchor, _ := strings.Cut(p, "#")
				if _, err := os.Stat("../../" + page); err != nil {
					t.Errorf("%s:%d: %s: no such page", file, i+1, p)
				} else if anchor != "" && !hasAnchor(t, "../../"+page, anchor) {
					t.Errorf("%s:%d: %s: %s has no heading #%s", file, i+1, p, page, anchor)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no docs/ pointer found in template.yaml or import-arc: the alarm text names the runner versions page")
	}
}

// labNotebook is what belongs in CONTRIBUTING.md or docs/design/, not in a
// user page: test and benchmark names, the machine a figure was measured on,
// DynamoDB keys, the simulator's API.
var labNotebook = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9]+|\bBenchmark[A-Z][A-Za-z0-9]+|_test\.go|\bthis machine\b|\b[PS]K=|` +
	`\bmake bench\b|\bgithubsim\.|\bnot built here\b`)

// TestUserPagesHoldUserFacts: the user pages name no test, benchmark,
// measuring machine or table key; docs/design/measurements.md keeps them.
func TestUserPagesHoldUserFacts(t *testing.T) {
	t.Parallel()
	for _, file := range userPages(t) {
		prose, _ := split(t, file)
		for _, l := range prose {
			if m := labNotebook.FindString(l.text); m != "" {
				t.Errorf("%s:%d: %q is for contributors: move it to CONTRIBUTING.md or docs/design/", file, l.line, m)
			}
		}
	}
}

// TestSupportedVersionsAreTheBuilds: getting-started's table of supported
// versions says the Go release of go.mod, the actions/runner release of
// runner/Dockerfile and the Kubernetes release the local stack tests with.
func TestSupportedVersionsAreTheBuilds(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	find := func(file, pattern string) string {
		t.Helper()
		m := regexp.MustCompile(pattern).FindStringSubmatch(read(file))
		if m == nil {
			t.Fatalf("%s: no %s", file, pattern)
		}
		return m[1]
	}
	goVersion := find("../../go.mod", `(?m)^go (\d+\.\d+)`)
	runner := find("../../runner/Dockerfile", `(?m)^ARG RUNNER_VERSION=(\S+)`)
	kube := find("../../local/kube-build.sh", `(?m)^k8s_version=v(\d+\.\d+)`)
	rows := map[string]string{}
	prose, _ := split(t, "../../docs/getting-started.md")
	for _, l := range prose {
		cells := strings.Split(strings.Trim(l.text, "| "), "|")
		if len(cells) == 3 {
			rows[strings.TrimSpace(cells[0])] = strings.TrimSpace(cells[1]) + " " + strings.TrimSpace(cells[2])
		}
	}
	for what, want := range map[string]string{
		"Go": goVersion + " or later", "actions/runner": runner + " in", "EKS (Kubernetes)": "tested against Kubernetes " + kube,
	} {
		if !strings.Contains(rows[what], want) {
			t.Errorf("docs/getting-started.md, supported versions, %s: %q, want it to say %q", what, rows[what], want)
		}
	}
}

// TestLogQueriesNameLoggedMessages: every log message a Logs Insights query of
// the docs filters on is one the functions log.
func TestLogQueriesNameLoggedMessages(t *testing.T) {
	t.Parallel()
	var sources strings.Builder
	for _, dir := range []string{"../../internal", "../../functions"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			sources.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	message := regexp.MustCompile(`message = "([^"]+)"`)
	n := 0
	for _, file := range docFiles(t) {
		_, code := split(t, file)
		for _, l := range code {
			for _, m := range message.FindAllStringSubmatch(l.text, -1) {
				n++
				if !strings.Contains(sources.String(), `"`+m[1]+`"`) {
					t.Errorf("%s:%d: no function logs %q", file, l.line, m[1])
				}
			}
		}
	}
	if n == 0 {
		t.Error("no Logs Insights query in the docs: operations.md has them")
	}
}

// TestPoolFieldsTableIsComplete: the table of fields in configuration.md has a
// row for every field of a pool (package pool's YAML names), and no other.
func TestPoolFieldsTableIsComplete(t *testing.T) {
	t.Parallel()
	want := map[string]bool{}
	var walk func(typ reflect.Type, prefix string, depth int)
	walk = func(typ reflect.Type, prefix string, depth int) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if depth == 0 || prefix == "kubernetes." {
				want[prefix+name] = true
			}
			if name == "kubernetes" {
				walk(f.Type, "kubernetes.", depth+1)
			}
		}
	}
	walk(reflect.TypeFor[pool.Pool](), "", 0)
	delete(want, "kubernetes")
	prose, _ := split(t, "../../docs/configuration.md")
	got := map[string]bool{}
	row := regexp.MustCompile("^\\| ((?:`[^`]+`(?: / )?)+) \\|")
	inTable := false
	for _, l := range prose {
		if strings.HasPrefix(l.text, "#") {
			inTable = l.text == "### Fields"
			continue
		}
		if m := row.FindStringSubmatch(l.text); inTable && m != nil {
			for _, f := range strings.Split(m[1], " / ") {
				got[strings.Trim(f, "`")] = true
			}
		}
	}
	for f := range want {
		if !got[f] {
			t.Errorf("docs/configuration.md's fields table lacks %s", f)
		}
	}
	for f := range got {
		if !want[f] {
			t.Errorf("docs/configuration.md's fields table has %s, which a pool has not", f)
		}
	}
}

// TestSchemaDescriptionsAreForUsers: the JSON Schema an editor shows names
// fields as the pools file writes them, and no Go constant, file or package.
func TestSchemaDescriptionsAreForUsers(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/pools.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	goish := regexp.MustCompile(`\bDefault[A-Z]\w*|\b\w+\.go\b|\bpackage [a-z]+|\bSee [A-Z]\w*|\bRegistration(JIT|Token)\b|\bUsesToken\b`)
	description := regexp.MustCompile(`"description": "((?:[^"\\]|\\.)*)"`)
	n := 0
	for _, m := range description.FindAllStringSubmatch(string(raw), -1) {
		n++
		if g := goish.FindString(m[1]); g != "" {
			t.Errorf("docs/pools.schema.json: description %q names %s, a Go identifier", m[1], g)
		}
	}
	if n < 20 {
		t.Fatalf("%d descriptions in docs/pools.schema.json", n)
	}
}
