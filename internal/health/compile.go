package health

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/api/v1alpha1"
)

// The limits on an expression. The estimate is the cost on the largest
// object the API server stores, every list of it as long as that object
// allows: a pass over a list fits; a comprehension inside another (a
// cost that grows with the square of a list's length) does not. The
// evaluation on the live object is bounded much lower: an evaluation
// allocates about 35 bytes per unit of cost (many small values, such as
// a literal split into characters), so MaxCost and MaxConcurrent bound
// the memory all evaluations hold at once to about 14 MiB.
const (
	// MaxExpressionLength bounds the bytes of one expression (the CRD's
	// maxLength of current, inProgress and failed says the same).
	MaxExpressionLength = 4096
	// MaxEstimatedCost bounds the cost Compile estimates: an expression
	// estimated over it is refused.
	MaxEstimatedCost = 100_000_000
	// MaxCost bounds the cost of one evaluation on the live object; an
	// evaluation that reaches it stops, and the object stays InProgress.
	// A comprehension over a list long enough to reach it (some 20,000
	// entries) runs into EvalTimeout first.
	MaxCost = 100_000
	// MaxConcurrent bounds the evaluations that run at once in the
	// process, whichever Syncs they are for; the others wait.
	MaxConcurrent = 4
	// EvalTimeout bounds one evaluation (once it runs).
	EvalTimeout = time.Second
	// MaxObjectBytes is the largest object the estimate assumes (the API
	// server's request limit): a list or map of it has at most half as
	// many entries, a string at most as many characters.
	MaxObjectBytes = 3 << 20
)

// typeNames are identifiers CEL itself resolves; they are never taken
// for fields of the object.
var typeNames = map[string]bool{"bool": true, "bytes": true, "double": true, "dyn": true, "int": true, "list": true,
	"map": true, "null_type": true, "string": true, "type": true, "uint": true}

// Checks are the compiled health checks of one Sync; the zero value and
// nil have none.
type Checks struct {
	byKind  map[schema.GroupKind]*check
	byGroup map[string]*check
}

// check is one compiled entry of spec.healthChecks.
type check struct {
	field                       string // spec.healthChecks[i]
	current, inProgress, failed *expression
}

// expression is one compiled expression and the field it was written in.
type expression struct {
	field string // spec.healthChecks[i].current
	text  string
	prog  cel.Program
}

// Compile compiles every expression of hcs (a Sync's spec.healthChecks).
// The error joins one line per problem, each naming its field
// (spec.healthChecks[1].failed: …) and what to change: an expression that
// does not parse or type-check, one that cannot return a bool, one longer
// than MaxExpressionLength, one whose estimated cost is over
// MaxEstimatedCost, a missing current, an
// apiVersion it cannot read, a second check for the same kind.
func Compile(hcs []v1alpha1.HealthCheck) (*Checks, error) {
	if len(hcs) == 0 {
		return nil, nil
	}
	c := &Checks{byKind: map[schema.GroupKind]*check{}, byGroup: map[string]*check{}}
	var errs []error
	seen := map[schema.GroupKind]string{}
	for i, hc := range hcs {
		field := fmt.Sprintf("spec.healthChecks[%d]", i)
		gv, err := schema.ParseGroupVersion(hc.APIVersion)
		if err != nil || hc.APIVersion == "" {
			errs = append(errs, fmt.Errorf("%s.apiVersion %q is not an apiVersion: write group/version, such as example.com/v1", field, hc.APIVersion))
			continue
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: hc.Kind}
		if first, ok := seen[gk]; ok {
			errs = append(errs, fmt.Errorf("%s checks %s again (%s does): keep one check per kind", field, describe(gk), first))
			continue
		}
		seen[gk] = field
		ch := &check{field: field}
		for _, e := range []struct {
			name string
			text string
			into **expression
		}{{"current", hc.Current, &ch.current}, {"inProgress", hc.InProgress, &ch.inProgress}, {"failed", hc.Failed, &ch.failed}} {
			f := field + "." + e.name
			if strings.TrimSpace(e.text) == "" {
				if e.name == "current" {
					errs = append(errs, fmt.Errorf("%s is empty: write the CEL expression that is true when %s is healthy", f, describe(gk)))
				}
				continue
			}
			if len(e.text) > MaxExpressionLength {
				errs = append(errs, fmt.Errorf("%s has %d bytes, over the limit of %d: write a shorter expression", f, len(e.text), MaxExpressionLength))
				continue
			}
			x, err := compile(e.text)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f, err))
				continue
			}
			x.field = f
			*e.into = x
		}
		if hc.Kind == "" {
			c.byGroup[gk.Group] = ch
		} else {
			c.byKind[gk] = ch
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func describe(gk schema.GroupKind) string {
	if gk.Kind == "" {
		return "every kind of group " + gk.Group
	}
	return gk.String()
}

// compile parses, type-checks and bounds one expression. Like Flux's, an
// expression sees the object's top-level fields by name (status.phase);
// it also sees the whole object as self.
func compile(text string) (*expression, error) {
	base, err := baseEnv()
	if err != nil {
		return nil, err
	}
	parsed, iss := base.Parse(text)
	if iss.Err() != nil {
		return nil, errors.New(oneLine(iss.Err().Error()))
	}
	var vars []cel.EnvOption
	for _, name := range fields(parsed) {
		vars = append(vars, cel.Variable(name, cel.DynType))
	}
	env, err := base.Extend(vars...)
	if err != nil {
		return nil, fmt.Errorf("declare the object's fields: %w", err)
	}
	checked, iss := env.Check(parsed)
	if iss.Err() != nil {
		return nil, errors.New(oneLine(iss.Err().Error()))
	}
	if t := checked.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("%q returns %s, not a bool: compare it, such as status.phase == 'Running'", text, t)
	}
	est, err := env.EstimateCost(checked, sizes{})
	if err != nil {
		return nil, fmt.Errorf("estimate its cost: %w", err)
	}
	if est.Max > MaxEstimatedCost {
		return nil, fmt.Errorf("%q is too costly: on an object of %d MiB its estimated cost is %s, over the limit of %d; "+
			"avoid a comprehension (all, exists, filter, map) inside another", text, MaxObjectBytes>>20, costText(est.Max), MaxEstimatedCost)
	}
	prog, err := env.Program(checked, cel.CostLimit(MaxCost), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%q: %w", text, err)
	}
	return &expression{text: text, prog: prog}, nil
}

// baseEnv is the CEL environment of every expression (Flux's, with self),
// made once: the fields an expression reads extend it.
var baseEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
		cel.Variable("self", cel.DynType),
	)
})

// fields are the names an expression reads from outside itself: the
// object's top-level fields, such as status (comprehension variables and
// CEL's type names excluded).
func fields(a *cel.Ast) []string {
	root := celast.NavigateAST(a.NativeRep())
	local := map[string]bool{}
	for _, c := range celast.MatchDescendants(root, celast.KindMatcher(celast.ComprehensionKind)) {
		comp := c.AsComprehension()
		local[comp.IterVar()], local[comp.IterVar2()], local[comp.AccuVar()] = true, true, true
	}
	set := map[string]bool{}
	for _, id := range celast.MatchDescendants(root, celast.KindMatcher(celast.IdentKind)) {
		name := id.AsIdent()
		if name != "self" && !local[name] && !typeNames[name] {
			set[name] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// sizes bounds every list, map and string of the object by MaxObjectBytes
// for the cost estimate: the object's fields are dynamic, so CEL knows no
// size of its own. A list or map entry takes at least 2 bytes of JSON.
type sizes struct{}

func (sizes) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: MaxObjectBytes / 2}
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

func costText(c uint64) string {
	switch {
	case c == math.MaxUint64:
		return "unbounded"
	case c >= 1e12:
		return fmt.Sprintf("%.1e", float64(c))
	}
	return fmt.Sprint(c)
}

// oneLine joins CEL's multi-line issue report (message, the expression,
// a caret under the column) into one line for a condition.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && strings.Trim(l, ".^ |") != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
