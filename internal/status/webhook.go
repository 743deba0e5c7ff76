package status

import (
	"net/http"
	"slices"
	"time"
)

// StaleAfter: a delivery check older than this is reported stale. Each
// scheduled sweep checks (by default every minute), so a stale check means they
// are not running or cannot read the log (see the sweeper's log).
const StaleAfter = 10 * time.Minute

// NewWebhook says, at now, what check (nil: none recorded) tells of the
// webhook's deliveries.
func NewWebhook(now time.Time, check *DeliveryCheck) Webhook {
	if check == nil {
		return Webhook{State: WebhookNotChecked}
	}
	w := Webhook{State: WebhookOK, CheckedAt: check.At, AgeSeconds: age(now, check.At),
		Stale: now.Sub(check.At) > StaleAfter, WindowSeconds: check.Window.Seconds(), Redelivered: check.Redelivered}
	for code, n := range check.ByStatus {
		if n <= 0 {
			continue
		}
		if w.ByStatus == nil {
			w.ByStatus = map[int]int{}
		}
		w.ByStatus[code] = n
		w.Failed += n
	}
	if w.Failed == 0 {
		return w
	}
	w.State, w.Latest = WebhookFailing, check.Latest
	w.Hints = hints(w.ByStatus, check.Redeliverable, check.Latest)
	return w
}

// statusClass groups the status codes a failed delivery may end with by what
// they usually mean.
type statusClass int

const (
	classSecret statusClass = iota
	classURL
	classPayload
	classFailing
	classOther
)

var classHints = map[statusClass]string{
	classSecret:  "the webhook secret in GitHub differs from the one in Secrets Manager",
	classURL:     "wrong webhook URL: the App's must be the stack's WebhookUrl output",
	classPayload: "payload rejected — see the webhook's log",
	classFailing: "the function failing or timing out — see its log; these are redelivered",
	classOther:   "refused — see the webhook's log",
}

// classOf classes code; redeliverable says whether the sweeper redelivers it.
func classOf(code int, redeliverable bool) statusClass {
	switch {
	case redeliverable:
		return classFailing
	case code == http.StatusUnauthorized:
		return classSecret
	case code == http.StatusNotFound || code == http.StatusGone:
		return classURL
	case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnprocessableEntity:
		return classPayload
	}
	return classOther
}

// hints is one hint per class seen, the latest delivery's class first, then by
// how many deliveries each explains.
func hints(byStatus map[int]int, redeliverable map[int]bool, latest *FailedDelivery) []DeliveryHint {
	counts := map[statusClass]int{}
	codes := map[statusClass][]int{}
	for code, n := range byStatus {
		c := classOf(code, redeliverable[code])
		counts[c] += n
		codes[c] = append(codes[c], code)
	}
	classes := make([]statusClass, 0, len(counts))
	for c := range counts {
		classes = append(classes, c)
	}
	first := classOther + 1
	if latest != nil {
		first = classOf(latest.StatusCode, redeliverable[latest.StatusCode])
	}
	slices.SortFunc(classes, func(a, b statusClass) int {
		switch {
		case a == first:
			return -1
		case b == first:
			return 1
		case counts[a] != counts[b]:
			return counts[b] - counts[a]
		}
		return int(a) - int(b)
	})
	out := make([]DeliveryHint, 0, len(classes))
	for _, c := range classes {
		slices.Sort(codes[c])
		out = append(out, DeliveryHint{Statuses: codes[c], Hint: classHints[c]})
	}
	return out
}
