// gocheck: checks a profile with google/pprof's own profile package, the
// parser `go tool pprof` uses, and prints what tests need to assert about
// it.  The oracle for every profile cpprof writes.
//
// Usage: gocheck [-frames] [-locations] [-mappings]
//
//	[-chain PATTERN [-where KEY=VALUE] [-numwhere KEY=N] [-value IDX]
//	[-apart LEAF;CALLER]] FILE
//
//	gocheck -fgprof HZ FOLDED OUT
//
// The second form writes to OUT the profile fgprof would make of the
// folded stacks in FOLDED ("root;...;leaf COUNT" lines) sampled at HZ:
// its types, period and one location per frame, as format.go's toPprof
// builds them (felixge/fgprof v0.9.5), with google/pprof's package, so
// that tests hold cpprof's /debug/fgprof against a profile of fgprof's
// shape that cpprof did not write.
//
// FILE is a profile.proto, gzip-compressed or not.  If the protobuf parser
// or CheckValid rejects it, gocheck prints the parser's message on stderr
// and exits with status 1 (2 for a usage or I/O error).  Otherwise it
// prints these lines on stdout, in this order, one item per line, fields
// separated by single spaces:
//
//	valid
//	sample_types TYPE/UNIT ...          every sample type, in order
//	period_type TYPE/UNIT PERIOD        only when the profile has one
//	default_sample_type TYPE            only when set
//	duration_nanos N
//	samples N                           number of samples
//	total IDX SUM                       per value index: sum over samples
//	tag KEY VALUE IDX SUM               per string label key/value and value
//	                                    index: sum of that value over the
//	                                    samples carrying the label
//	numtag KEY UNIT                     per numeric label key and unit
//
// and with options:
//
//	-frames:    frame FUNCTION FILE:LINE     per distinct line of a location
//	-locations: location FUNC@FILE:LINE ...  per location, its lines
//	            innermost (inlined) first, as pprof stores them
//	-mappings:  mapping FILE BUILDID functions=B filenames=B lines=B inline=B
//	            per mapping, in profile order (B is true or false; an empty
//	            FILE or BUILDID is printed as "-")
//	-chain:     chain judged N complete C
//	            chain incomplete V STACK      the 5 largest, largest first
//	            whether each judged sample's stack carries a known call
//	            chain.  PATTERN is function-name regular expressions
//	            separated by ";", outermost caller first, each matched
//	            against a whole name; a stack carries the chain when its
//	            function names, read from the root to the leaf with each
//	            location's inlined frames, hold a name matching each
//	            expression in that order (other frames may come between).
//	            The judged samples are those with the string label
//	            -where (or without the label KEY, -where '!KEY') and the
//	            numeric label -numwhere (all samples when
//	            neither is given), so which samples are judged never
//	            depends on their stacks.  N and C are sums of value IDX
//	            (-value, default 0) over them; V likewise per printed
//	            STACK, its names root first joined by ";" (an unsymbolized
//	            location as its address).
//	-apart:     chain apart A                 after "chain judged"
//	            a known place where no walk can find the caller: the
//	            selected samples whose leaf matches the expression LEAF
//	            and whose next frame is missing or does not match CALLER
//	            are summed in A and left out of N and C.
//
// Lines of each kind after "total" are sorted.  A field that is empty or
// holds a space, a quote or an unprintable character is printed Go-quoted
// (strconv.Quote), so simple names can be grepped as they are.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

func field(s string) string {
	for _, r := range s {
		if r == ' ' || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return strconv.Quote(s)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return field(s)
}

func fail(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "gocheck: "+format+"\n", args...)
	os.Exit(code)
}

// parse reports the protobuf parser's own message: profile.Parse would
// hide it behind its fallback to legacy formats ("unrecognized profile
// format").  It then also goes through profile.ParseData, the path
// `go tool pprof` takes, so that anything accepted here is accepted there.
func parse(data []byte) *profile.Profile {
	raw := data
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err == nil {
			raw, err = ioutil.ReadAll(gz)
		}
		if err != nil {
			fail(1, "decompressing profile: %v", err)
		}
	}
	p, err := profile.ParseUncompressed(raw)
	if err != nil {
		fail(1, "parsing profile: %v", err)
	}
	if err := p.CheckValid(); err != nil {
		fail(1, "malformed profile: %v", err)
	}
	if _, err := profile.ParseData(data); err != nil {
		fail(1, "%v", err)
	}
	return p
}

func printSorted(lines map[string]bool) {
	var sorted []string
	for l := range lines {
		sorted = append(sorted, l)
	}
	sort.Strings(sorted)
	for _, l := range sorted {
		fmt.Println(l)
	}
}

func printSummary(p *profile.Profile) {
	fmt.Println("valid")
	types := []string{"sample_types"}
	for _, st := range p.SampleType {
		types = append(types, field(st.Type+"/"+st.Unit))
	}
	fmt.Println(strings.Join(types, " "))
	if pt := p.PeriodType; pt != nil {
		fmt.Printf("period_type %s %d\n", field(pt.Type+"/"+pt.Unit), p.Period)
	}
	if p.DefaultSampleType != "" {
		fmt.Printf("default_sample_type %s\n", field(p.DefaultSampleType))
	}
	fmt.Printf("duration_nanos %d\n", p.DurationNanos)
	fmt.Printf("samples %d\n", len(p.Sample))
	totals := make([]int64, len(p.SampleType))
	type tagKey struct {
		key, value string
		idx        int
	}
	tags := map[tagKey]int64{}
	numtags := map[string]bool{}
	for _, s := range p.Sample {
		for i, v := range s.Value {
			totals[i] += v
			for key, values := range s.Label {
				for _, value := range values {
					tags[tagKey{key, value, i}] += v
				}
			}
		}
		for key := range s.NumLabel {
			for _, unit := range s.NumUnit[key] {
				numtags[fmt.Sprintf("numtag %s %s", field(key), field(unit))] = true
			}
		}
	}
	for i, t := range totals {
		fmt.Printf("total %d %d\n", i, t)
	}
	var keys []tagKey
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.key != b.key {
			return a.key < b.key
		}
		if a.value != b.value {
			return a.value < b.value
		}
		return a.idx < b.idx
	})
	for _, k := range keys {
		fmt.Printf("tag %s %s %d %d\n", field(k.key), field(k.value), k.idx, tags[k])
	}
	printSorted(numtags)
}

func lineText(l profile.Line) (name, place string) {
	return field(l.Function.Name), field(fmt.Sprintf("%s:%d", l.Function.Filename, l.Line))
}

func printFrames(p *profile.Profile) {
	frames := map[string]bool{}
	for _, loc := range p.Location {
		for _, l := range loc.Line {
			name, place := lineText(l)
			frames["frame "+name+" "+place] = true
		}
	}
	printSorted(frames)
}

func printLocations(p *profile.Profile) {
	locations := map[string]bool{}
	for _, loc := range p.Location {
		parts := []string{"location"}
		for _, l := range loc.Line {
			name, place := lineText(l)
			parts = append(parts, name+"@"+place)
		}
		locations[strings.Join(parts, " ")] = true
	}
	printSorted(locations)
}

func printMappings(p *profile.Profile) {
	for _, m := range p.Mapping {
		fmt.Printf("mapping %s %s functions=%t filenames=%t lines=%t inline=%t\n",
			orDash(m.File), orDash(m.BuildID), m.HasFunctions,
			m.HasFilenames, m.HasLineNumbers, m.HasInlineFrames)
	}
}

// rootFirst is the function names of a sample's stack, outermost caller
// first; a location's lines are stored innermost (inlined) first.
func rootFirst(s *profile.Sample) []string {
	var names []string
	for i := len(s.Location) - 1; i >= 0; i-- {
		loc := s.Location[i]
		if len(loc.Line) == 0 {
			names = append(names, fmt.Sprintf("%#x", loc.Address))
		}
		for j := len(loc.Line) - 1; j >= 0; j-- {
			names = append(names, loc.Line[j].Function.Name)
		}
	}
	return names
}

// carries says whether names hold a match of each pattern in order: a
// greedy walk finds an in-order match whenever there is one.
func carries(names []string, pattern []*regexp.Regexp) bool {
	k := 0
	for _, n := range names {
		if k < len(pattern) && pattern[k].MatchString(n) {
			k++
		}
	}
	return k == len(pattern)
}

// selected says whether s has the string label key=value and the numeric
// label numKey=numValue (an empty key asks nothing).
func selected(s *profile.Sample, key, value, without, numKey string, numValue int64) bool {
	if without != "" && len(s.Label[without]) > 0 {
		return false
	}
	if key != "" {
		found := false
		for _, v := range s.Label[key] {
			found = found || v == value
		}
		if !found {
			return false
		}
	}
	if numKey != "" {
		found := false
		for _, v := range s.NumLabel[numKey] {
			found = found || v == numValue
		}
		if !found {
			return false
		}
	}
	return true
}

// wholeNames compiles flag's ";"-separated expressions, each matched
// against a whole function name.
func wholeNames(flag, exprs string) []*regexp.Regexp {
	var pattern []*regexp.Regexp
	for _, expr := range strings.Split(exprs, ";") {
		re, err := regexp.Compile("^(?:" + expr + ")$")
		if err != nil {
			fail(2, "%s: %v", flag, err)
		}
		pattern = append(pattern, re)
	}
	return pattern
}

// leftApart says whether a stack (names root first) has its leaf matching
// apart[0] and no next frame matching apart[1] (-apart).
func leftApart(names []string, apart []*regexp.Regexp) bool {
	n := len(names)
	if apart == nil || n == 0 || !apart[0].MatchString(names[n-1]) {
		return false
	}
	return n == 1 || !apart[1].MatchString(names[n-2])
}

func printChain(p *profile.Profile, chain, where, numWhere, apartFlag string, idx int) {
	pattern := wholeNames("-chain", chain)
	var apart []*regexp.Regexp
	if apartFlag != "" {
		if apart = wholeNames("-apart", apartFlag); len(apart) != 2 {
			fail(2, "-apart wants LEAF;CALLER, not %q", apartFlag)
		}
	}
	var key, value, without, numKey string
	var numValue int64
	if strings.HasPrefix(where, "!") {
		without = where[1:]
	} else if where != "" {
		kv := strings.SplitN(where, "=", 2)
		if len(kv) != 2 {
			fail(2, "-where wants KEY=VALUE, not %q", where)
		}
		key, value = kv[0], kv[1]
	}
	if numWhere != "" {
		kv := strings.SplitN(numWhere, "=", 2)
		var err error
		if len(kv) == 2 {
			numValue, err = strconv.ParseInt(kv[1], 10, 64)
		}
		if len(kv) != 2 || err != nil {
			fail(2, "-numwhere wants KEY=N, not %q", numWhere)
		}
		numKey = kv[0]
	}
	if idx < 0 || idx >= len(p.SampleType) {
		fail(2, "-value %d: the profile has %d sample types", idx, len(p.SampleType))
	}
	var judged, complete, apartSum int64
	missing := map[string]int64{}
	for _, s := range p.Sample {
		if !selected(s, key, value, without, numKey, numValue) {
			continue
		}
		names := rootFirst(s)
		if leftApart(names, apart) {
			apartSum += s.Value[idx]
			continue
		}
		judged += s.Value[idx]
		if carries(names, pattern) {
			complete += s.Value[idx]
		} else {
			missing[strings.Join(names, ";")] += s.Value[idx]
		}
	}
	fmt.Printf("chain judged %d complete %d\n", judged, complete)
	if apart != nil {
		fmt.Printf("chain apart %d\n", apartSum)
	}
	var stacks []string
	for st := range missing {
		stacks = append(stacks, st)
	}
	sort.Slice(stacks, func(i, j int) bool {
		if missing[stacks[i]] != missing[stacks[j]] {
			return missing[stacks[i]] > missing[stacks[j]]
		}
		return stacks[i] < stacks[j]
	})
	for i, st := range stacks {
		if i == 5 {
			break
		}
		fmt.Printf("chain incomplete %d %s\n", missing[st], field(st))
	}
}

// writeFgprof writes fgprof's profile of the folded stacks in file `in`.
func writeFgprof(hz int, in, out string) {
	data, err := ioutil.ReadFile(in)
	if err != nil {
		fail(2, "%v", err)
	}
	m := &profile.Mapping{ID: 1, HasFunctions: true}
	p := &profile.Profile{
		Mapping:    []*profile.Mapping{m},
		Period:     int64(1e9 / hz),
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "time", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "wallclock", Unit: "nanoseconds"},
	}
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		cut := strings.LastIndexByte(line, ' ')
		count, err := strconv.ParseInt(line[cut+1:], 10, 64)
		if cut <= 0 || err != nil {
			fail(1, "not a folded line: %q", line)
		}
		s := &profile.Sample{Value: []int64{count, int64(1e9/hz) * count}}
		for _, name := range strings.Split(line[:cut], ";") {
			id := uint64(len(p.Function) + 1)
			fn := &profile.Function{ID: id, Name: name}
			loc := &profile.Location{ID: id, Mapping: m, Line: []profile.Line{{Function: fn}}}
			p.Function = append(p.Function, fn)
			p.Location = append(p.Location, loc)
			s.Location = append([]*profile.Location{loc}, s.Location...)
		}
		p.Sample = append(p.Sample, s)
	}
	f, err := os.Create(out)
	if err == nil {
		err = p.Write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fail(2, "%v", err)
	}
}

func main() {
	frames := flag.Bool("frames", false, "print a frame line per distinct location line")
	locations := flag.Bool("locations", false, "print each location's lines")
	mappings := flag.Bool("mappings", false, "print each mapping")
	chain := flag.String("chain", "", "report the samples carrying this call chain")
	where := flag.String("where", "", "with -chain: judge samples with this label KEY=VALUE (or without label KEY: !KEY)")
	numWhere := flag.String("numwhere", "", "with -chain: judge samples with this numeric label KEY=N")
	value := flag.Int("value", 0, "with -chain: the sample value to sum")
	apart := flag.String("apart", "", "with -chain: LEAF;CALLER, samples whose leaf matches LEAF but whose next frame is missing or not CALLER are summed apart, not judged")
	fgprofHz := flag.Int("fgprof", 0, "write fgprof's profile of folded stacks sampled at this rate")
	flag.Parse()
	if *fgprofHz > 0 {
		if flag.NArg() != 2 {
			fail(2, "usage: gocheck -fgprof HZ FOLDED OUT")
		}
		writeFgprof(*fgprofHz, flag.Arg(0), flag.Arg(1))
		return
	}
	if flag.NArg() != 1 {
		fail(2, "usage: gocheck [-frames] [-locations] [-mappings] "+
			"[-chain PATTERN [-where KEY=VALUE] [-numwhere KEY=N] [-value IDX] "+
			"[-apart LEAF;CALLER]] FILE")
	}
	data, err := ioutil.ReadFile(flag.Arg(0))
	if err != nil {
		fail(2, "%v", err)
	}
	p := parse(data)
	printSummary(p)
	if *frames {
		printFrames(p)
	}
	if *locations {
		printLocations(p)
	}
	if *mappings {
		printMappings(p)
	}
	if *chain != "" {
		printChain(p, *chain, *where, *numWhere, *apart, *value)
	}
}
