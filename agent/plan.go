package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// The planner (the Plan loop) runs an agent as a Taskmaster/BabyAGI-style
// planner: the model breaks the objective into a list of tasks, each
// handed to one of the agent's tools (minions are tools too); after each
// task the model revises the rest of the list from the results; when the
// list is empty or the budget (Agent.MaxTasks) is spent, the model writes
// the final answer from the results. Each model call is one step (a
// RoundStart ... RoundEnd); the calls of a step are the task it hands out
// next. The planning steps ask for structured output
// (provider.Request.Output), and an answer that is not a valid task list
// is sent back once with the error.

// Task is one entry of a plan.
type Task struct {
	// Task says what to do.
	Task string `json:"task"`
	// Tool is the tool or minion that does it.
	Tool string `json:"tool"`
	// Input is the tool's input.
	Input map[string]any `json:"input"`
}

// DoneTask is a task that ran, with its result.
type DoneTask struct {
	Task
	Result  string `json:"result"`
	IsError bool   `json:"is_error,omitempty"`
}

// Plan is the planner's state: the objective, the tasks still to do
// and those done.
type Plan struct {
	Objective string     `json:"objective"`
	Tasks     []Task     `json:"tasks"`
	Done      []DoneTask `json:"done"`
}

// DefaultMaxTasks is a planner's budget when none is set.
const DefaultMaxTasks = 10

// planSchema is the structured output of a planning step, built on the
// first plan rather than at every nb start.
var planSchema = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"tasks": map[string]any{
				"type": "array",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"task":  map[string]any{"type": "string"},
						"tool":  map[string]any{"type": "string"},
						"input": map[string]any{"type": "object"},
					},
					"required": []any{"task", "tool", "input"},
				},
			},
		},
		"required": []any{"tasks"},
	}
})

// askPlan runs the planner on an objective.
func (a *Agent) askPlan(ctx context.Context, objective string) (*Result, error) {
	raw := objective
	if err := a.record(state.Event{At: state.Now(), Who: state.RoleUser, Mode: string(a.Mode), Input: &raw, Message: objective}); err != nil {
		return nil, err
	}
	a.emit(Event{Kind: UserInput, Text: objective})
	budget := a.MaxTasks
	if budget <= 0 {
		budget = DefaultMaxTasks
	}
	ctx = provider.WithRetryNotify(ctx, func(err error, attempt int, delay time.Duration) {
		a.emit(Event{Kind: Retry, Err: err, Attempt: attempt, Delay: delay})
	})
	// MaxTasks bounds the planner's steps: no round limit, but the
	// token budget, the loop detector and compaction as in the other
	// loops.
	r := &planRun{Agent: a, plan: Plan{Objective: objective}, guard: a.newGuard("planning steps", 0)}
	a.lastPlan = r
	res, err := r.run(ctx, budget)
	var stop *planStop
	if errors.As(err, &stop) {
		return r.guard.result(a.Cartridge.Stream(a.Mode), r.step, stop.why, stop.notice, contextPressure{tokens: r.tokens}), nil
	}
	return res, err
}

// run plans, runs the tasks and writes the answer.
func (r *planRun) run(ctx context.Context, budget int) (*Result, error) {
	a := r.Agent
	tasks, err := r.planStep(ctx, "Break the objective into a short list of tasks, in order. Each task is done by one of the tools, with the input you give it. An objective that needs no tool has an empty list.")
	if err != nil {
		return nil, err
	}
	r.setTasks(tasks)
	for len(r.plan.Tasks) > 0 && len(r.plan.Done) < budget {
		t := r.plan.Tasks[0]
		r.plan.Tasks = r.plan.Tasks[1:]
		out, isErr, err := a.callTool(ctx, r.next)
		if err != nil {
			return nil, err
		}
		r.plan.Done = append(r.plan.Done, DoneTask{Task: t, Result: out, IsError: isErr})
		r.changed()
		warning, stop := r.guard.loop([]tool.Call{r.next})
		if stop != "" {
			return nil, &planStop{why: StopLoop, notice: stop}
		}
		r.warning = warning
		if len(r.plan.Done) >= budget {
			break
		}
		tasks, err := r.planStep(ctx, "Revise the tasks still to do in the light of the results so far: keep, change, add or drop tasks. An objective that is reached has an empty list.")
		if err != nil {
			return nil, err
		}
		r.warning = "" // told once
		r.setTasks(tasks)
	}
	return r.finalStep(ctx, "")
}

// planStop is a planner stopped by its guard (the token budget, a loop).
type planStop struct{ why, notice string }

func (s *planStop) Error() string { return s.notice }

// planRun is one run of the planner.
type planRun struct {
	*Agent
	plan  Plan
	step  int
	guard *guard
	// tokens is the estimated size of the last request.
	tokens int
	// warning is the loop detector's warning, told the next planning step.
	warning string
	// next is the call of the first task of the plan, announced with the
	// step that planned it.
	next tool.Call
	// lastAnswer is the last final answer given.
	lastAnswer string
}

func (r *planRun) changed() {
	if r.OnPlan != nil {
		r.OnPlan(clonePlan(r.plan))
	}
}

func clonePlan(p Plan) Plan {
	// Empty lists stay lists ([] in JSON, not null).
	p.Tasks = append([]Task{}, p.Tasks...)
	p.Done = append([]DoneTask{}, p.Done...)
	return p
}

func (r *planRun) setTasks(tasks []Task) {
	r.plan.Tasks = tasks
	r.changed()
}

// system is the planner's system text.
func (r *planRun) system(task string) string {
	b := r.Cartridge.Behavior("interaction")
	var s strings.Builder
	s.WriteString("You are the planner of an agent. The tools that do the work:\n\n")
	for _, sp := range r.Tools.Specs() {
		params, _ := json.Marshal(sp.Parameters)
		fmt.Fprintf(&s, "- %s: %s\n  input schema: %s\n", sp.Name, strings.TrimSpace(sp.Description), params)
	}
	fmt.Fprintf(&s, "\n%s", task)
	return joinNonEmpty("\n\n", r.Context, b.Directive, b.Instruction, s.String())
}

// state describes the plan to the model.
// When the provider refused a longer request (Agent.squeeze), the
// results are abridged, head and tail kept, to fit.
func (r *planRun) state() string {
	var s strings.Builder
	fmt.Fprintf(&s, "Objective: %s\n", r.plan.Objective)
	if len(r.plan.Done) > 0 {
		s.WriteString("\nTasks done, with their results:\n")
		keep, cut := 0, 0
		if r.squeeze > 0 {
			keep = max(r.squeeze*4/len(r.plan.Done), 2*abridgeKeep)
		}
		for i, d := range r.plan.Done {
			status := ""
			if d.IsError {
				status = " (failed)"
			}
			result := d.Result
			if keep > 0 && utf8.RuneCountInString(result) > keep {
				result = abridgeText(result)
				cut++
			}
			fmt.Fprintf(&s, "%d. %s [%s]%s: %s\n", i+1, d.Task.Task, d.Tool, status, result)
		}
		r.abridged = max(r.abridged, cut)
	}
	if len(r.plan.Tasks) > 0 {
		list, _ := json.Marshal(r.plan.Tasks)
		fmt.Fprintf(&s, "\nTasks still to do: %s\n", list)
	}
	if r.warning != "" {
		fmt.Fprintf(&s, "\n%s\n", r.warning)
	}
	return s.String()
}

// call makes a request as one step: the guard's limits, events, usage,
// and one compaction when the provider refuses the request as too long
// (build makes it again). calls are announced with the step's end.
func (r *planRun) call(ctx context.Context, build func() provider.Request, calls func(*provider.Response) []tool.Call) (*provider.Response, error) {
	a := r.Agent
	if why, notice := r.guard.stop(r.step + 1); why != "" {
		return nil, &planStop{why: why, notice: notice}
	}
	r.step++
	stream := a.Cartridge.Stream(a.Mode)
	finish := func(req provider.Request) provider.Request {
		req.Stream = stream
		req.User, req.Override = a.User, a.Override
		return req
	}
	req := finish(build())
	r.tokens = requestTokens(req)
	a.emit(Event{Kind: RoundStart, Round: r.step, Provider: a.Provider.ID(), Model: a.model(), ContextTokens: r.tokens, ContextBudget: a.Budget})
	var resp *provider.Response
	var err error
	for {
		streamed := false
		resp, err = a.Provider.Complete(ctx, req, func(ev provider.Event) {
			if ev.Kind == provider.TextDelta {
				streamed = streamed || ev.Text != ""
				a.emit(Event{Kind: TextDelta, Text: ev.Text})
			}
		})
		if !r.guard.retry(ctx, err, streamed, req, func() provider.Request { return finish(build()) }) {
			break
		}
		req = finish(build())
		r.tokens = requestTokens(req)
	}
	if err != nil {
		return nil, err
	}
	r.guard.usage.Add(resp.Usage)
	var cs []tool.Call
	if calls != nil {
		cs = calls(resp)
	}
	a.emit(Event{Kind: RoundEnd, Round: r.step, Text: resp.Text, Usage: resp.Usage, Calls: cs})
	return resp, nil
}

// planStep asks for the task list, once more with the error when the
// answer is not one.
func (r *planRun) planStep(ctx context.Context, task string) ([]Task, error) {
	msgs := []provider.Message{{Role: provider.RoleUser, Content: r.state()}}
	for attempt := 0; ; attempt++ {
		var tasks []Task
		var problem string
		build := func() provider.Request {
			m := append([]provider.Message{{Role: provider.RoleUser, Content: r.state()}}, msgs[1:]...)
			return provider.Request{System: r.system(task), Messages: m, Output: &provider.OutputSchema{Name: "plan", Schema: planSchema()}}
		}
		resp, err := r.call(ctx, build, func(resp *provider.Response) []tool.Call {
			tasks, problem = r.parsePlan(resp.Text)
			if problem != "" || len(tasks) == 0 || len(r.plan.Done) >= r.budget() {
				return nil
			}
			r.next = tool.Call{ID: provider.NewCallID(), Name: tasks[0].Tool, Arguments: tasks[0].Input}
			return []tool.Call{r.next}
		})
		if err != nil {
			return nil, err
		}
		if problem == "" {
			return tasks, nil
		}
		if attempt == 1 {
			return nil, fmt.Errorf("the planner's answer is not a task list: %s", problem)
		}
		msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: resp.Text},
			provider.Message{Role: provider.RoleUser, Content: "That is not a valid task list: " + problem + ". Answer again with a JSON object {\"tasks\": [{\"task\": ..., \"tool\": ..., \"input\": {...}}]}."})
	}
}

func (r *planRun) budget() int {
	if r.MaxTasks <= 0 {
		return DefaultMaxTasks
	}
	return r.MaxTasks
}

// parsePlan reads a task list; problem says what is wrong with it.
func (r *planRun) parsePlan(text string) ([]Task, string) {
	var out struct {
		Tasks []Task `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(StripFence(text)), &out); err != nil {
		return nil, "it is not a JSON object (" + err.Error() + ")"
	}
	for i, t := range out.Tasks {
		if _, ok := r.Tools.Lookup(t.Tool); !ok {
			return nil, fmt.Sprintf("task %d names the tool %q, which does not exist (the tools are: %s)", i+1, t.Tool, r.toolNames())
		}
		if t.Input == nil {
			out.Tasks[i].Input = map[string]any{}
		}
	}
	return out.Tasks, ""
}

// finalStep asks for the answer from the results.
func (r *planRun) finalStep(ctx context.Context, complaint string) (*Result, error) {
	a := r.Agent
	note := "Write the final answer to the objective from the results of the tasks."
	if len(r.plan.Tasks) > 0 {
		note += " The budget of tasks is spent: say what is left undone."
	}
	build := func() provider.Request {
		msgs := []provider.Message{{Role: provider.RoleUser, Content: r.state()}}
		if complaint != "" {
			msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: r.lastAnswer}, provider.Message{Role: provider.RoleUser, Content: complaint})
		}
		return provider.Request{System: joinNonEmpty("\n\n", a.Cartridge.Behavior("interaction").Directive, note),
			Messages: msgs, Output: a.Structured}
	}
	resp, err := r.call(ctx, build, nil)
	var stop *planStop
	if errors.As(err, &stop) && complaint != "" {
		return r.guard.result(a.Cartridge.Stream(a.Mode), r.step, stop.why, stop.notice, contextPressure{tokens: r.tokens}), nil
	}
	if err != nil {
		return nil, err
	}
	r.lastAnswer = resp.Text
	output := resp.Text
	if err := a.record(state.Event{At: state.Now(), Who: state.RoleAI, Mode: string(a.Mode), Message: resp.Text, Output: &output}); err != nil {
		return nil, err
	}
	return &Result{Text: resp.Text, Display: resp.Text, Streamed: a.Cartridge.Stream(a.Mode), Usage: r.guard.usage, Rounds: r.step, FinishReason: resp.FinishReason,
		ContextTokens: r.tokens, ContextBudget: a.Budget}, nil
}

// StripFence removes a Markdown code fence around JSON (models wrap
// JSON answers in one even when told not to).
func StripFence(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```json")
		s = strings.TrimPrefix(s, "```")
		s = strings.TrimSuffix(strings.TrimSpace(s), "```")
	}
	return strings.TrimSpace(s)
}
