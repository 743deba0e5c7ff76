package tests

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/runnerscaler/runnerscaler/internal/table"
)

// capacityMeter adds up the request units a DynamoDB client's requests consume,
// as on-demand DynamoDB bills them. Each request asks for its consumed capacity
// (ReturnConsumedCapacity TOTAL) and the server's count is added: dynalite, like
// DynamoDB, counts 4 KB read units (halved for eventually consistent reads) and
// 1 KB write units. Two things dynalite does not count are added by rule:
//   - a write to a reservation item also writes the sparse `active` index
//     (entering it, changing in it, or leaving it): one more write unit (the
//     items are under 1 KB);
//   - a conditional write that fails (a lease held, a delivery out of order)
//     is billed by DynamoDB as one write unit; dynalite reports nothing.
type capacityMeter struct {
	mu       sync.Mutex
	rru, wru float64
}

// capacity is a snapshot of a meter.
type capacity struct{ rru, wru float64 }

func (c capacity) minus(d capacity) capacity { return capacity{c.rru - d.rru, c.wru - d.wru} }

func (m *capacityMeter) read() capacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	return capacity{m.rru, m.wru}
}

// client returns a client of base's server whose requests m meters.
func (m *capacityMeter) client(base *dynamodb.Client) *dynamodb.Client {
	return dynamodb.New(base.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("capacityMeter", m.handle), middleware.After)
		})
	})
}

// request is what the meter needs to know of a request.
type request struct {
	write, indexed bool // a write; a write of a reservation (an item of the active index)
}

func (m *capacityMeter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	var req request
	in.Parameters, req = askCapacity(in.Parameters)
	out, md, err := next.HandleInitialize(ctx, in)
	var failed *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		m.add(req, consumed(out.Result))
	case req.write && errors.As(err, &failed):
		m.add(request{write: true}, 1)
	}
	return out, md, err
}

func (m *capacityMeter) add(req request, units float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !req.write:
		m.rru += units
	case req.indexed:
		m.wru += units + 1
	default:
		m.wru += units
	}
}

// askCapacity returns a copy of the request's input that asks for its consumed
// capacity, and what kind of request it is.
func askCapacity(params any) (any, request) {
	const total = types.ReturnConsumedCapacityTotal
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		c := *in
		c.ReturnConsumedCapacity = total
		return &c, request{}
	case *dynamodb.QueryInput:
		c := *in
		c.ReturnConsumedCapacity = total
		return &c, request{}
	case *dynamodb.PutItemInput:
		c := *in
		c.ReturnConsumedCapacity = total
		return &c, request{write: true, indexed: reservationKey(in.Item)}
	case *dynamodb.UpdateItemInput:
		c := *in
		c.ReturnConsumedCapacity = total
		return &c, request{write: true, indexed: reservationKey(in.Key)}
	case *dynamodb.DeleteItemInput:
		c := *in
		c.ReturnConsumedCapacity = total
		return &c, request{write: true, indexed: reservationKey(in.Key)}
	}
	return params, request{}
}

// reservationKey: the item is a job's reservation (SK JOB#<id>).
func reservationKey(item map[string]types.AttributeValue) bool {
	sk, ok := item[table.SortKey].(*types.AttributeValueMemberS)
	return ok && strings.HasPrefix(sk.Value, "JOB#")
}

// consumed is the capacity a response reports; 1 unit when it reports none.
func consumed(result any) float64 {
	var cc *types.ConsumedCapacity
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		cc = out.ConsumedCapacity
	case *dynamodb.QueryOutput:
		cc = out.ConsumedCapacity
	case *dynamodb.PutItemOutput:
		cc = out.ConsumedCapacity
	case *dynamodb.UpdateItemOutput:
		cc = out.ConsumedCapacity
	case *dynamodb.DeleteItemOutput:
		cc = out.ConsumedCapacity
	}
	if cc == nil || cc.CapacityUnits == nil {
		return 1
	}
	return *cc.CapacityUnits
}
