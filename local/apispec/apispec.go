// Package apispec checks HTTP exchanges with the GitHub REST API, and webhook
// deliveries, against GitHub's published OpenAPI descriptions, with
// kin-openapi's validator. The tests use it to keep the GitHub simulator
// (local/githubsim) honest: every request the product sends it must be an
// operation of the description with valid path, query and body, and every
// answer one the description allows for that operation; every workflow_job
// delivery must match the webhook's payload schema.
//
// The descriptions are subsets of GitHub's, embedded from description/ (its
// README names their source and version): the operations a runner autoscaler
// uses, from the api.github.com description and, for the enterprise-level
// endpoints that only GitHub Enterprise Cloud has, from the ghec one; and the
// workflow_job webhooks. An exchange is checked against api.github.com when it
// has the operation, else against ghec.
//
// GitHub's descriptions list, per operation, the answers specific to it, not
// those any operation can get (GitHub's REST documentation describes them
// separately): 304 to a conditional GET, 401 for bad credentials, 403 and 429
// for rate limits and missing permissions, 404 for a resource that does not exist
// or that the caller may not see, and 5xx. CheckExchange accepts one of those
// statuses for any operation when the body (none for 304) is a basic-error, and
// says so in its Match (Generic), so that callers can report what the
// description itself does not promise.
package apispec

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed description/api.github.com.subset.json description/ghec.subset.json description/webhooks.subset.json
var descriptionFiles embed.FS

// GenericStatuses are the statuses GitHub may answer any operation with (see the
// package comment); 304 only to a GET.
var GenericStatuses = []int{
	http.StatusNotModified, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
	http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
	http.StatusServiceUnavailable, http.StatusGatewayTimeout,
}

// ErrUnknownOperation is returned for a request that is no operation of the
// descriptions.
var ErrUnknownOperation = errors.New("apispec: no such operation in GitHub's description")

// Exchange is one request to the GitHub REST API and its answer.
type Exchange struct {
	Method string
	Path   string // the URL's path, e.g. /orgs/acme/actions/runners
	Query  string // the URL's raw query, without '?'
	// RequestHeader needs at least the request's Content-Type when it has a body.
	RequestHeader  http.Header
	RequestBody    []byte
	Status         int
	ResponseHeader http.Header
	ResponseBody   []byte
}

func (x Exchange) String() string {
	s := x.Method + " " + x.Path
	if x.Query != "" {
		s += "?" + x.Query
	}
	return fmt.Sprintf("%s -> %d", s, x.Status)
}

// Match is what a conforming exchange matched.
type Match struct {
	Description string // "api.github.com" or "ghec"
	OperationID string
	Method      string
	Path        string // the description's path template
	Status      int
	// Generic: the operation does not list Status, one of GenericStatuses.
	Generic bool
	// NullBody: the request's body was the JSON null, which the description does
	// not allow but GitHub takes as no body where the body is optional (see
	// CheckExchange).
	NullBody bool
}

// Description is GitHub's REST and webhook descriptions, ready to check against.
// It is safe for concurrent use.
type Description struct {
	rest       []restDescription // api.github.com first
	webhooks   map[string]*jsonschema.Schema
	basicError *openapi3.Schema
}

type restDescription struct {
	name   string
	doc    *openapi3.T
	router routers.Router
}

// Load returns the embedded descriptions, parsed and validated once per process
// (they are read-only afterwards).
func Load() (*Description, error) { return loadOnce() }

var loadOnce = sync.OnceValues(load)

func load() (*Description, error) {
	d := &Description{}
	for _, name := range []string{"api.github.com", "ghec"} {
		doc, err := loadFile("description/"+name+".subset.json", false)
		if err != nil {
			return nil, err
		}
		router, err := gorillamux.NewRouter(doc)
		if err != nil {
			return nil, fmt.Errorf("routing %s: %w", name, err)
		}
		d.rest = append(d.rest, restDescription{name: name, doc: doc, router: router})
	}
	ref := d.rest[0].doc.Components.Schemas["basic-error"]
	if ref == nil || ref.Value == nil {
		return nil, errors.New("apispec: api.github.com has no basic-error schema")
	}
	d.basicError = ref.Value
	var err error
	if d.webhooks, err = compileWebhooks(); err != nil {
		return nil, err
	}
	return d, nil
}

// compileWebhooks compiles the JSON schema of each webhook's payload once. The
// webhook description is OpenAPI 3.1, whose schemas are JSON Schema 2020-12:
// kin-openapi checks the document, and its JSON Schema 2020-12 engine
// (santhosh-tekuri/jsonschema) validates payloads, compiled here once instead
// of on every call as (*openapi3.Schema).VisitJSON does.
func compileWebhooks() (map[string]*jsonschema.Schema, error) {
	const path = "description/webhooks.subset.json"
	doc, err := loadFile(path, true)
	if err != nil {
		return nil, err
	}
	data, err := descriptionFiles.ReadFile(path)
	if err != nil {
		return nil, err
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const url = "https://api.github.com/webhooks.json"
	if err := c.AddResource(url, raw); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for name, item := range doc.Webhooks {
		if item.Post == nil || item.Post.RequestBody == nil || item.Post.RequestBody.Value.Content.Get("application/json") == nil {
			return nil, fmt.Errorf("%s: webhook %s has no JSON payload", path, name)
		}
		sch, err := c.Compile(url + "#/webhooks/" + name + "/post/requestBody/content/application~1json/schema")
		if err != nil {
			return nil, fmt.Errorf("%s: webhook %s: %w", path, name, err)
		}
		out[name] = sch
	}
	return out, nil
}

func loadFile(path string, webhooks bool) (*openapi3.T, error) {
	data, err := descriptionFiles.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	// GitHub's examples of the form {"value": null} fail kin-openapi's example
	// checks; they are upstream content, not ours to fix.
	if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("validating %s: %w", path, err)
	}
	if webhooks && len(doc.Webhooks) == 0 {
		return nil, fmt.Errorf("%s has no webhooks", path)
	}
	return doc, nil
}

// CheckExchange checks x against the description: the operation exists, its
// path and query parameters and its body are valid, and the answer's status and
// body are ones the operation allows (or a generic one, see the package
// comment). It returns what x matched, or why it does not conform
// (ErrUnknownOperation for a request that is no operation).
func (d *Description) CheckExchange(ctx context.Context, x Exchange) (Match, error) {
	// ghinstallation posts the JSON null as the body of POST
	// /app/installations/{installation_id}/access_tokens when no token options
	// are set; that operation's body is optional, and GitHub treats null as none.
	nullBody := strings.TrimSpace(string(x.RequestBody)) == "null"
	if nullBody {
		x.RequestBody = nil
	}
	req, err := x.request(ctx)
	if err != nil {
		return Match{}, err
	}
	var rd restDescription
	var route *routers.Route
	var params map[string]string
	for _, cand := range d.rest {
		route, params, err = cand.router.FindRoute(req)
		if err == nil {
			rd = cand
			break
		}
	}
	if route == nil {
		return Match{}, fmt.Errorf("%s %s: %w", x.Method, x.Path, ErrUnknownOperation)
	}
	m := Match{Description: rd.name, OperationID: route.Operation.OperationID, Method: x.Method, Path: route.Path,
		Status: x.Status, NullBody: nullBody}
	if rb := route.Operation.RequestBody; nullBody && (rb == nil || rb.Value == nil || rb.Value.Required) {
		return m, fmt.Errorf("%s: request (%s): the body is null, where the operation takes none or requires one", x, m.OperationID)
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:                openapi3filter.NoopAuthenticationFunc,
		RejectWhenRequestBodyNotSpecified: true,
		IncludeResponseStatus:             true,
		MultiError:                        true,
	}
	opts.WithCustomSchemaErrorFunc(briefSchemaError)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		return m, fmt.Errorf("%s: request (%s): %w", x, m.OperationID, err)
	}
	if route.Operation.Responses.Status(x.Status) == nil {
		m.Generic = true
		return m, d.checkGeneric(x, m)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status,
		Header: x.ResponseHeader, Options: opts}
	out.SetBodyBytes(x.ResponseBody)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return m, fmt.Errorf("%s: response (%s): %w", x, m.OperationID, err)
	}
	return m, nil
}

func (x Exchange) request(ctx context.Context) (*http.Request, error) {
	u := "https://api.github.com" + x.Path
	if x.Query != "" {
		u += "?" + x.Query
	}
	var body io.Reader = http.NoBody
	if len(x.RequestBody) > 0 {
		body = bytes.NewReader(x.RequestBody)
	}
	req, err := http.NewRequestWithContext(ctx, x.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", x, err)
	}
	for k, v := range x.RequestHeader {
		req.Header[k] = slices.Clone(v)
	}
	return req, nil
}

// checkGeneric checks an answer whose status the operation does not list.
func (d *Description) checkGeneric(x Exchange, m Match) error {
	if !slices.Contains(GenericStatuses, x.Status) || (x.Status == http.StatusNotModified && x.Method != http.MethodGet) {
		return fmt.Errorf("%s: status %d is not allowed for %s (%s %s)", x, x.Status, m.OperationID, m.Method, m.Path)
	}
	if x.Status == http.StatusNotModified {
		if len(x.ResponseBody) > 0 {
			return fmt.Errorf("%s: a 304 has no body", x)
		}
		return nil
	}
	if ct := x.ResponseHeader.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("%s: error body of type %q, not JSON", x, ct)
	}
	var v any
	if err := json.Unmarshal(x.ResponseBody, &v); err != nil {
		return fmt.Errorf("%s: error body: %w", x, err)
	}
	if err := d.basicError.VisitJSON(v); err != nil {
		return fmt.Errorf("%s: error body is no basic-error: %w", x, err)
	}
	if obj, _ := v.(map[string]any); obj["message"] == nil {
		return fmt.Errorf("%s: error body has no message", x)
	}
	return nil
}

// CheckDelivery checks a webhook delivery's payload against the webhook's
// schema, found by its event (the X-GitHub-Event header) and the payload's
// action: workflow_job with action queued is the webhook workflow-job-queued.
func (d *Description) CheckDelivery(event string, payload []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("%s delivery: %w", event, err)
	}
	name := strings.ReplaceAll(event, "_", "-")
	if obj, ok := v.(map[string]any); ok {
		if action, ok := obj["action"].(string); ok {
			name += "-" + strings.ReplaceAll(action, "_", "-")
		}
	}
	sch := d.webhooks[name]
	if sch == nil {
		return fmt.Errorf("%s delivery: no webhook %q in the description", event, name)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s delivery (webhook %s): %s", event, name, briefValidationError(err))
	}
	return nil
}

// briefSchemaError says where a value fails its schema and why, without the
// schema and the value, which kin-openapi prints whole by default.
func briefSchemaError(err *openapi3.SchemaError) string {
	msg := fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), err.Reason)
	if err.Origin != nil {
		msg += " (" + err.Origin.Error() + ")"
	}
	return msg
}

// briefValidationError lists where a payload fails its schema and why, one
// failure (a leaf of the validator's error tree) after another.
func briefValidationError(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	english := message.NewPrinter(language.English)
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, fmt.Sprintf("at /%s: %s", strings.Join(e.InstanceLocation, "/"),
				e.ErrorKind.LocalizedString(english)))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(leaves, "; ")
}
