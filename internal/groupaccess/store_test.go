package groupaccess_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnerscaler/runnerscaler/internal/groupaccess"
	"github.com/runnerscaler/runnerscaler/internal/scope"
	"github.com/runnerscaler/runnerscaler/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestStoreRoundTrip: what Put writes, Get reads back, under the scope and
// the group's name in any case; before any Put, and for another group, Get
// finds nothing; a Put replaces the item.
func TestStoreRoundTrip(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := groupaccess.NewStore(db, name)
	ctx := t.Context()
	if _, ok, err := s.Get(ctx, acme, "gpus"); err != nil || ok {
		t.Fatalf("Get before any Put: %v, %v; want nothing", ok, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	in := groupaccess.Access{Scope: acme, Group: "GPUs", GroupID: 7, Visibility: groupaccess.Selected, ETag: `W/"g"`,
		Pages:  []groupaccess.Page{{ETag: `W/"1"`, Repositories: []string{"acme/a", "acme/b"}}, {ETag: `W/"2"`, Repositories: []string{"acme/c"}}},
		ReadAt: at}
	if err := s.Put(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Get(ctx, acme, "gpus")
	if err != nil || !ok || got.GroupID != 7 || got.Visibility != groupaccess.Selected || got.ETag != in.ETag ||
		!got.ReadAt.Equal(at) || len(got.Pages) != 2 || got.Pages[1].ETag != `W/"2"` ||
		!slices.Equal(got.Repositories(), []string{"acme/a", "acme/b", "acme/c"}) {
		t.Fatalf("Get = %+v, %v, %v; want what was put", got, ok, err)
	}
	if _, ok, err := s.Get(ctx, scope.Scope{Organization: "other"}, "gpus"); err != nil || ok {
		t.Fatalf("another organization's group: %v, %v; want nothing", ok, err)
	}
	if err := s.Put(ctx, groupaccess.Access{Scope: acme, Group: "gpus", GroupID: 7, Visibility: groupaccess.Private, ReadAt: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Get(ctx, acme, "GPUS"); got.Visibility != groupaccess.Private || len(got.Pages) != 0 {
		t.Fatalf("after a second Put: %+v; want it replaced", got)
	}
}

// TestGroupTooLargeForItsItemIsUnchecked: a group whose repositories no
// longer fit in one item (DynamoDB's 400 KB) replaces what was stored of it
// with an item that checks nothing, so routing admits every repository, those
// added since the last read included, instead of refusing them by the old
// list for as long as the group stays that large.
func TestGroupTooLargeForItsItemIsUnchecked(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := groupaccess.NewStore(db, name)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	small := groupaccess.Access{Scope: acme, Group: "big", GroupID: 7, Visibility: groupaccess.Selected,
		Pages: []groupaccess.Page{{ETag: `W/"1"`, Repositories: []string{"acme/a"}}}, ReadAt: at}
	if err := s.Put(ctx, small); err != nil {
		t.Fatal(err)
	}
	large := small
	large.Pages, large.ReadAt = nil, at.Add(time.Hour)
	for p := range 60 {
		page := groupaccess.Page{ETag: fmt.Sprintf(`W/"%d"`, p)}
		for i := range 100 {
			page.Repositories = append(page.Repositories, fmt.Sprintf("acme/%s-%02d-%02d", strings.Repeat("x", 60), p, i))
		}
		large.Pages = append(large.Pages, page)
	}
	if err := s.Put(ctx, large); err != nil {
		t.Fatalf("Put of a group too large for its item: %v", err)
	}
	got, ok, err := s.Get(ctx, acme, "big")
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	added := large.Pages[59].Repositories[99]
	if admitted, why := got.Admits(added, false); !admitted || got.Visibility != groupaccess.Unchecked || !got.ReadAt.Equal(large.ReadAt) {
		t.Fatalf("after the too-large read: %+v admits %s: %v (%s); want unchecked, read at %s, admitting it", got.Visibility, added, admitted, why, large.ReadAt)
	}
}

// TestStoreListsAndDeletes: List names every group stored, by scope and name
// as written; Delete removes one's item (whatever the name's case), and
// deleting it again is no error.
func TestStoreListsAndDeletes(t *testing.T) {
	t.Parallel()
	db, name := testenv.Table(t)
	s := groupaccess.NewStore(db, name)
	ctx := t.Context()
	acme, other := scope.Scope{Organization: "acme"}, scope.Scope{Organization: "other"}
	for _, a := range []groupaccess.Access{{Scope: acme, Group: "GPUs"}, {Scope: other, Group: "big"}} {
		if err := s.Put(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := s.List(ctx)
	slices.SortFunc(stored, func(a, b groupaccess.Stored) int { return strings.Compare(a.Scope, b.Scope) })
	if want := []groupaccess.Stored{{Scope: "organization/acme", Group: "GPUs"}, {Scope: "organization/other", Group: "big"}}; err != nil || !slices.Equal(stored, want) {
		t.Fatalf("listed %+v (%v), want %+v", stored, err, want)
	}
	for range 2 {
		if err := s.Delete(ctx, groupaccess.Stored{Scope: "organization/acme", Group: "gpus"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, found, err := s.Get(ctx, acme, "GPUs"); found || err != nil {
		t.Fatalf("deleted group still found (%v)", err)
	}
	if stored, err := s.List(ctx); err != nil || len(stored) != 1 {
		t.Fatalf("listed after a delete: %+v (%v), want the other group", stored, err)
	}
}
