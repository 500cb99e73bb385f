package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"sort"
)

// Operator families, named as gremlins names its defaults, so a figure
// from this tool and one from gremlins count the same kinds of mutant.
const (
	opBoundary  = "CONDITIONALS_BOUNDARY"
	opNegation  = "CONDITIONALS_NEGATION"
	opArith     = "ARITHMETIC_BASE"
	opIncDec    = "INCREMENT_DECREMENT"
	opInvertNeg = "INVERT_NEGATIVES"
)

// Mutant is one changed operator: the expression at Line:Col with From
// replaced by To.
type Mutant struct {
	ID     int    `json:"id"`
	File   string `json:"file"` // base name, in the package's directory
	Line   int    `json:"line"`
	Col    int    `json:"col"`
	Family string `json:"family"`
	From   string `json:"from"`
	To     string `json:"to"`
	// CoverLine:CoverCol, when set, is where coverage is read instead: a
	// case expression lies in no block of Go's coverage profile, so its
	// tests are those that reached the switch statement.
	CoverLine int      `json:"cover_line,omitempty"`
	CoverCol  int      `json:"cover_col,omitempty"`
	Status    string   `json:"status,omitempty"`
	Tests     []string `json:"tests,omitempty"`
	DurationS float64  `json:"duration_s,omitempty"`
}

// coverPos is where the mutant's coverage is read.
func (m *Mutant) coverPos() (int, int) {
	if m.CoverLine > 0 {
		return m.CoverLine, m.CoverCol
	}
	return m.Line, m.Col
}

// caseCover maps each switch's case expressions, by their byte span, to
// the switch statement's position: Go's coverage profile has blocks for
// case bodies, none for the expressions that choose them.
func caseCover(fset *token.FileSet, f *ast.File) func(off int) (token.Position, bool) {
	type span struct {
		start, end int
		at         token.Position
	}
	var spans []span
	ast.Inspect(f, func(n ast.Node) bool {
		if sw, ok := n.(*ast.SwitchStmt); ok {
			for _, st := range sw.Body.List {
				cc := st.(*ast.CaseClause)
				for _, e := range cc.List {
					spans = append(spans, span{fset.Position(e.Pos()).Offset, fset.Position(e.End()).Offset, fset.Position(sw.Switch)})
				}
			}
		}
		return true
	})
	return func(off int) (token.Position, bool) {
		for _, s := range spans {
			if off >= s.start && off < s.end {
				return s.at, true
			}
		}
		return token.Position{}, false
	}
}

func (m *Mutant) String() string {
	return fmt.Sprintf("%s:%d:%d %s %s → %s", m.File, m.Line, m.Col, m.Family, m.From, m.To)
}

type siteKind int

const (
	siteCmp    siteKind = iota // a comparison: rendered as a chain of && / || (type-free)
	siteArith                  // a binary arithmetic operator: a generic helper call
	siteIncDec                 // x++ / x--: x = helper(id, x)
	siteNeg                    // -x: a generic helper call
)

// site is one expression or statement that carries mutants, with the
// byte offsets the schema rewrite needs: the node's span and its operands'.
type site struct {
	kind       siteKind
	start, end int // the whole node
	xs, xe     int // first operand (x of x op y, x of x++, x of -x)
	ys, ye     int // second operand (binary only)
	op         token.Token
	muts       []*Mutant
}

// conditional mutations: boundary moves the edge, negation inverts.
var (
	boundary = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
	negation = map[token.Token]token.Token{token.EQL: token.NEQ, token.NEQ: token.EQL, token.LSS: token.GEQ, token.LEQ: token.GTR, token.GTR: token.LEQ, token.GEQ: token.LSS}
	arith    = map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL}
)

// findSites walks one file and returns its mutation sites. info (may be
// nil) holds the package's types: with it, constant expressions (which a
// schema cannot switch at run time: array lengths, const declarations) and
// string concatenation (which has no `-`) are left out.
func findSites(fset *token.FileSet, f *ast.File, info *types.Info) []*site {
	var sites []*site
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	constant := func(e ast.Expr) bool {
		if info == nil {
			return false
		}
		tv, ok := info.Types[e]
		return ok && tv.Value != nil
	}
	numeric := func(e ast.Expr) bool {
		if info == nil {
			return true
		}
		tv, ok := info.Types[e]
		if !ok || tv.Type == nil {
			return false
		}
		if _, isParam := tv.Type.(*types.TypeParam); isParam {
			return false // the helpers' constraint may not cover it
		}
		b, ok := tv.Type.Underlying().(*types.Basic)
		return ok && b.Info()&types.IsNumeric != 0
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok == token.CONST {
				return false // constants cannot be switched at run time
			}
		case *ast.ArrayType:
			return false // a length is a constant
		case *ast.BinaryExpr:
			if constant(n) {
				return false
			}
			s := &site{start: off(n.Pos()), end: off(n.End()), xs: off(n.X.Pos()), xe: off(n.X.End()), ys: off(n.Y.Pos()), ye: off(n.Y.End()), op: n.Op}
			pos := fset.Position(n.OpPos)
			add := func(family string, to token.Token) {
				s.muts = append(s.muts, &Mutant{File: pos.Filename, Line: pos.Line, Col: pos.Column, Family: family, From: n.Op.String(), To: to.String()})
			}
			if to, ok := boundary[n.Op]; ok {
				add(opBoundary, to)
			}
			if to, ok := negation[n.Op]; ok {
				add(opNegation, to)
				s.kind = siteCmp
			}
			if to, ok := arith[n.Op]; ok && numeric(n) {
				add(opArith, to)
				s.kind = siteArith
			}
			if len(s.muts) > 0 {
				sites = append(sites, s)
			}
		case *ast.IncDecStmt:
			if !numeric(n.X) {
				return true
			}
			pos := fset.Position(n.TokPos)
			to := token.DEC
			if n.Tok == token.DEC {
				to = token.INC
			}
			sites = append(sites, &site{kind: siteIncDec, start: off(n.Pos()), end: off(n.End()), xs: off(n.X.Pos()), xe: off(n.X.End()), op: n.Tok,
				muts: []*Mutant{{File: pos.Filename, Line: pos.Line, Col: pos.Column, Family: opIncDec, From: n.Tok.String(), To: to.String()}}})
		case *ast.UnaryExpr:
			if n.Op != token.SUB || constant(n) || !numeric(n.X) {
				return true
			}
			pos := fset.Position(n.OpPos)
			sites = append(sites, &site{kind: siteNeg, start: off(n.Pos()), end: off(n.End()), xs: off(n.X.Pos()), xe: off(n.X.End()), op: n.Op,
				muts: []*Mutant{{File: pos.Filename, Line: pos.Line, Col: pos.Column, Family: opInvertNeg, From: "-", To: "+"}}})
		}
		return true
	})
	sort.SliceStable(sites, func(i, j int) bool {
		if sites[i].start != sites[j].start {
			return sites[i].start < sites[j].start
		}
		return sites[i].end > sites[j].end // the enclosing site first
	})
	inCase := caseCover(fset, f)
	for _, st := range sites {
		if at, ok := inCase(st.start); ok {
			for _, m := range st.muts {
				m.CoverLine, m.CoverCol = at.Line, at.Column
			}
		}
	}
	return sites
}
