package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/approvals/approvals/queue"
)

// ChannelStore is what a channel's notifier needs of the store: the
// messages it sent, and the action as it is now.
type ChannelStore interface {
	queue.ChannelMessages
	ActionGetByID(ctx context.Context, id string) (*queue.Action, error)
}

// ChannelNotifier makes the channel kind ch (queue.Channel) the
// queue.Notifier the outbox's sender calls, under the kind's name
// (classify.KindSlack, …). It keeps what every kind shares: a notification
// that asks for attention is sent as a new message, whose Ref is recorded
// in st; one that reports how things ended (queue.Reports) updates the
// messages recorded for the action in its channel; and a message sent
// while the action was being decided elsewhere is updated at once. st may
// be nil for a kind that records nothing (its Sent has no Ref).
func ChannelNotifier[M any](kind string, ch queue.Channel[M], st ChannelStore, now func() time.Time) queue.Notifier {
	if now == nil {
		now = time.Now
	}
	return &channelNotifier[M]{kind: kind, ch: ch, st: st, now: now}
}

type channelNotifier[M any] struct {
	kind string
	ch   queue.Channel[M]
	st   ChannelStore
	now  func() time.Time
}

// PlanChannelStore is what a channel's notifier needs of the store for a
// plan's notifications; a ChannelStore without it records no plan's
// messages (a kind whose Sent has no Ref needs none).
type PlanChannelStore interface {
	queue.PlanMessages
	PlanGetByID(ctx context.Context, id string) (*queue.Plan, error)
}

func (c *channelNotifier[M]) Notify(ctx context.Context, n queue.Notification) error {
	if n.Plan != nil {
		return c.notifyPlan(ctx, n)
	}
	if n.Action == nil {
		return fmt.Errorf("notification %s: no action", n.ID)
	}
	m, err := c.ch.Render(n)
	if err != nil {
		return err
	}
	if queue.Reports(n.Type) {
		sent, err := c.sent(ctx, n)
		if err != nil {
			return err
		}
		s, err := c.ch.Update(ctx, n, sent, m)
		if err != nil {
			return err
		}
		_, err = c.record(ctx, n, s)
		return err
	}
	s, err := c.ch.Send(ctx, n, m)
	if err != nil {
		return err
	}
	rec, err := c.record(ctx, n, s)
	if err != nil || rec == nil || n.Action.State != queue.StatePending {
		return err
	}
	// Sent while pending: if the action was decided meanwhile, its
	// decision's update may have run (in another process) before this
	// message was recorded, and so missed it. Update it now; every kind's
	// update is idempotent.
	cur, err := c.st.ActionGetByID(ctx, n.Action.ID)
	if err != nil || cur.State == queue.StatePending {
		return nil // the decision's own notification (retried) finds the message
	}
	n.Action = cur
	if m, err = c.ch.Render(n); err != nil {
		return err
	}
	_, err = c.ch.Update(ctx, n, []queue.ChannelMessage{*rec}, m)
	return err
}

// notifyPlan is Notify for a plan's notification: the same steps, on the
// messages recorded for the plan.
func (c *channelNotifier[M]) notifyPlan(ctx context.Context, n queue.Notification) error {
	m, err := c.ch.Render(n)
	if err != nil {
		return err
	}
	ps, _ := c.st.(PlanChannelStore)
	if queue.Reports(n.Type) {
		var sent []queue.ChannelMessage
		if ps != nil {
			all, err := ps.PlanMessageList(ctx, n.Plan.ID)
			if err != nil {
				return fmt.Errorf("list the messages of plan %s: %w", n.Plan.ID, err)
			}
			for _, m := range all {
				if m.Kind == c.kind && m.Address == n.Channel.Address() {
					sent = append(sent, m)
				}
			}
		}
		s, err := c.ch.Update(ctx, n, sent, m)
		if err != nil {
			return err
		}
		_, err = c.record(ctx, n, s)
		return err
	}
	s, err := c.ch.Send(ctx, n, m)
	if err != nil {
		return err
	}
	rec, err := c.record(ctx, n, s)
	if err != nil || rec == nil || ps == nil || n.Plan.State != queue.PlanPending {
		return err
	}
	// Sent while pending: a decision made meanwhile may have missed this
	// message, as for an action's.
	cur, err := ps.PlanGetByID(ctx, n.Plan.ID)
	if err != nil {
		return nil
	}
	cur.Settle(c.now())
	if cur.State == queue.PlanPending {
		return nil
	}
	n.Plan = cur
	if m, err = c.ch.Render(n); err != nil {
		return err
	}
	_, err = c.ch.Update(ctx, n, []queue.ChannelMessage{*rec}, m)
	return err
}

// sent lists the messages recorded for n's action in n's channel.
func (c *channelNotifier[M]) sent(ctx context.Context, n queue.Notification) ([]queue.ChannelMessage, error) {
	if c.st == nil {
		return nil, nil
	}
	all, err := c.st.ChannelMessageList(ctx, n.Action.ID)
	if err != nil {
		return nil, fmt.Errorf("list the messages of action %s: %w", n.Action.ID, err)
	}
	var out []queue.ChannelMessage
	for _, m := range all {
		if m.Kind == c.kind && m.Address == n.Channel.Address() {
			out = append(out, m)
		}
	}
	return out, nil
}

// record keeps a message that can be updated later. If recording fails
// the outbox retries and sends again: a duplicate message, which is the
// at-least-once price; a message never recorded would keep its buttons for
// good.
func (c *channelNotifier[M]) record(ctx context.Context, n queue.Notification, s queue.Sent) (*queue.ChannelMessage, error) {
	if s.Ref == "" {
		return nil, nil
	}
	if n.Plan != nil {
		if _, ok := c.st.(PlanChannelStore); !ok {
			return nil, fmt.Errorf("%s message %s of plan %s: no store to record it in", c.kind, s.Ref, n.Plan.ID)
		}
		m := queue.ChannelMessage{PlanID: n.Plan.ID, Kind: c.kind, Address: s.Address, Ref: s.Ref, SentAt: c.now().UTC()}
		if m.Address == "" {
			m.Address = n.Channel.Address()
		}
		if err := c.st.ChannelMessageAdd(ctx, m); err != nil {
			return nil, fmt.Errorf("record %s message %s of plan %s: %w", c.kind, s.Ref, n.Plan.ID, err)
		}
		return &m, nil
	}
	if c.st == nil {
		return nil, fmt.Errorf("%s message %s of action %s: no store to record it in", c.kind, s.Ref, n.Action.ID)
	}
	addr := s.Address
	if addr == "" {
		addr = n.Channel.Address()
	}
	m := queue.ChannelMessage{ActionID: n.Action.ID, Kind: c.kind, Address: addr, Ref: s.Ref, SentAt: c.now().UTC()}
	if err := c.st.ChannelMessageAdd(ctx, m); err != nil {
		return nil, fmt.Errorf("record %s message %s of action %s: %w", c.kind, s.Ref, n.Action.ID, err)
	}
	return &m, nil
}
