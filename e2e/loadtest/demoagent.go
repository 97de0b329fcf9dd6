package loadtest

import (
	"context"
	"fmt"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
)

// demoAgent is the agent the running stack's router acts for, and its policy before the run.
type demoAgent struct {
	id     hubuapi.AgentID
	name   string
	policy hubuapi.Policy
}

// agentToken is the token the router acts with: HUBU_AGENT_TOKEN in the router's own
// environment, which is the agent every spend of the run is made for; else the env file's.
func (rs *runningStack) routerAgentToken() string {
	if pid, err := pidListening(rs.router); err == nil {
		if v, err := environValue(pid, "HUBU_AGENT_TOKEN"); err == nil && v != "" {
			return v
		}
	}
	return rs.agentToken
}

// raiseDemoAgent finds the agent the router acts for (Hubu's capabilities for its token),
// keeps its policy and raises its budget as the load test's own stack does.
func (rs *runningStack) raiseDemoAgent(ctx context.Context) (*demoAgent, error) {
	agent, err := hubuapi.NewClientWithResponses(rs.hubuURL, hubuapi.WithRequestEditorFn(withBearer(rs.routerAgentToken())))
	if err != nil {
		return nil, err
	}
	caps, err := agent.GetCapabilitiesWithResponse(ctx)
	if err != nil {
		return nil, fmt.Errorf("find the demo agent (GET /v1/capabilities): %v", err)
	}
	if caps.JSON200 == nil {
		return nil, fmt.Errorf("find the demo agent (GET /v1/capabilities): HTTP %d: %s", caps.StatusCode(), caps.Body)
	}
	op, err := operatorClient(rs.hubuURL, rs.operatorToken)
	if err != nil {
		return nil, err
	}
	got, err := op.GetAgentWithResponse(ctx, caps.JSON200.AgentId)
	if err != nil {
		return nil, fmt.Errorf("read the demo agent's policy: %v", err)
	}
	if got.JSON200 == nil {
		return nil, fmt.Errorf("read the demo agent's policy: HTTP %d: %s", got.StatusCode(), got.Body)
	}
	a := &demoAgent{id: got.JSON200.Id, name: got.JSON200.Name, policy: got.JSON200.Policy}
	if err := setPolicy(ctx, op, a.id, generousPolicy()); err != nil {
		return nil, fmt.Errorf("raise the demo agent's budget: %v", err)
	}
	return a, nil
}

// restore puts the agent's policy back as it was before the run, and says how much of its
// budget the period has used (the run's spends count in it).
func (rs *runningStack) restore(ctx context.Context, a *demoAgent) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	op, err := operatorClient(rs.hubuURL, rs.operatorToken)
	if err != nil {
		return "", err
	}
	if err := setPolicy(ctx, op, a.id, a.policy); err != nil {
		return "", err
	}
	said := fmt.Sprintf("agent %s (%s): its policy was raised for the run and restored after it", a.name, a.id)
	agent, err := hubuapi.NewClientWithResponses(rs.hubuURL, hubuapi.WithRequestEditorFn(withBearer(rs.routerAgentToken())))
	if err != nil {
		return said, nil
	}
	if caps, err := agent.GetCapabilitiesWithResponse(ctx); err == nil && caps.JSON200 != nil {
		b := caps.JSON200.Budget
		said += fmt.Sprintf("; the run's spends count in its budget: %s of %s used this %s", dollars(b.UsedMicros), dollars(b.LimitMicros), b.Period)
		if b.RemainingMicros <= 0 {
			said += " (none left: it is refused until the period ends, or raise its policy)"
		}
	}
	return said, nil
}

func setPolicy(ctx context.Context, op *hubuapi.ClientWithResponses, id hubuapi.AgentID, p hubuapi.Policy) error {
	resp, err := op.SetAgentPolicyWithResponse(ctx, id, p)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode(), resp.Body)
	}
	return nil
}

func dollars(micros int64) string { return fmt.Sprintf("$%.2f", float64(micros)/1e6) }
