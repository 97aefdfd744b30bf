// browsercheck: opens the /debug/pprof/ index in Debian's headless chromium,
// the way a user would, and reports what the page shows.
//
// Usage: browsercheck -url URL -shots DIR [-cpu SECONDS] [-insecure]
//
//	[-flame -proto FILE -note TEXT]
//	browsercheck -url URL -bench PROFILE [-runs N]
//	browsercheck -framed -url URL [-watch SECONDS]
//	browsercheck -url URL -trace SECONDS -shots DIR [-trace-fixture FILE]
//
// -insecure starts chromium with --ignore-certificate-errors, for an
// https URL whose server certificate a throwaway CA signed: headless
// chromium can be told to trust a CA only through an NSS database (Debian's
// libnss3-tools), which the tests do not need otherwise.
//
// It drives chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: NUL-terminated JSON on file descriptors 3 and
// 4), so it needs nothing beyond Go's standard library and the browser: no
// network, no npm.  It loads the page at a wide (1400 px) viewport, waits
// for the page's scripts to fill the labels view, presses "Profile CPU"
// with SECONDS and waits for that view too, then saves full-page
// screenshots at phone (390 px) and wide width into DIR (phone.png,
// wide.png).  It prints, one per line:
//
//	profile NAME COUNT        per row of the profile table
//	threads KEY VALUE COUNT   per row of the threads-by-label view
//	tasks KEY VALUE COUNT     per row of the tasks-by-label view
//	cpu KEY VALUE SHARE COUNT per row of the CPU-by-label view
//	cputotal N                the CPU view's samples in all, as its note says
//	compare KEY VALUE CPU WALL with -flame: per row of the "CPU and wall"
//	                          view (1 s), the value's shares (0 to 1)
//	cpuform SECONDS STATE TEXT the CPU form as the page opened, before the
//	                          press: its seconds, its button (ready or
//	                          busy) and its status text
//	overflow WIDTH PX         when the page is wider than the viewport
//	console LEVEL TEXT        per error the page logged or threw
//
// With -flame it then works the flame-graph views, as a user would: the
// threads (goroutine) view filtered by note=TEXT (a label value the demo
// gives its parked threads, -note), the heap view filtered by a tenant,
// then a CPU window of SECONDS: all samples, tenant=initech (the profile
// shown is saved as FILE, -proto, from the page's own download link), the
// search box, the diff of acme against initech, the top table; the
// screenshots are taken last, the CPU graph on screen.  It prints:
//
//	flame note ROOT OPTION SCRIPTS  threads carrying note=TEXT in the graph's
//	                                root, whether the filter's list offers
//	                                note=TEXT, the page's <script> elements
//	flame heap MESSAGE              what the heap view says to the filter
//	                                ("declined: REASON" when the server
//	                                has no heap profile)
//	flame cpu ROOT DRAWN MS         all samples: the root's sample count,
//	                                frames drawn, ms from text to graph
//	flame wall ALL INITECH TYPE     a 1 s wall profile's root, in the wall
//	                                type's nanoseconds, all and under
//	                                tenant=initech
//	flame initech ROOT              the root's samples under tenant=initech
//	flame search SHARE TEXT         the search box's share and its words
//	flame zoom ZOOMED TEXT          whether a click on the frame above the
//	                                root zoomed into it, and what hovering
//	                                it said
//	flame diff DRAWN TEXT           frames drawn, and the view's message
//	flame top ROWS FIRST            the top table's rows and first function
//
// With -bench (bench/flame.sh) it only loads the page and shows PROFILE's
// flame graph N times (default 3), printing per run
//
//	bench PROFILE RESPONSE_MS RENDER_MS DRAWN SAMPLES
//
// the milliseconds from the response's headers to the drawn graph, from
// the JSON text to the drawn graph, the frames drawn and the samples read.
//
// With -framed it only plays another site holding URL in a hidden frame
// (see framed).
//
// With -trace it only works the timeline view (www/trace.js): presses
// "Trace" for SECONDS, and prints what it drew (see traceChecks); the
// section is saved as DIR/trace.png.  With -trace-fixture the browser's
// requests for /debug/pprof/trace are answered with FILE instead of
// reaching the server (the DevTools protocol's Fetch domain), so the view
// can be checked against a known trace.
//
// It exits 1 with the reason on stderr when the browser or the page fails.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The browser, killed however the check ends.
var browser *exec.Cmd

type cdp struct {
	in      *os.File      // our end of the browser's fd 3 (commands)
	out     *bufio.Reader // our end of the browser's fd 4 (replies, events)
	nextID  int
	session string
	// With -trace-fixture: the JSON that answers the page's requests for
	// /debug/pprof/trace, and the URLs it asked for.
	fixture   []byte
	traceURLs []string
	sideID    int // ids of commands sent while waiting for another's reply
}

type reply struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// call sends one command and waits for its reply, skipping events.
func (c *cdp) call(method string, params map[string]any) (json.RawMessage, error) {
	c.nextID++
	msg := map[string]any{"id": c.nextID, "method": method, "params": params}
	if c.session != "" {
		msg["sessionId"] = c.session
	}
	b, _ := json.Marshal(msg)
	if _, err := c.in.Write(append(b, 0)); err != nil {
		return nil, err
	}
	for {
		line, err := c.out.ReadBytes(0)
		if err != nil {
			return nil, fmt.Errorf("%s: browser closed the pipe: %v", method, err)
		}
		var r reply
		if err := json.Unmarshal(line[:len(line)-1], &r); err != nil {
			return nil, err
		}
		if r.ID != c.nextID {
			if r.Method == "Fetch.requestPaused" {
				if err := c.answerPaused(r.Params); err != nil {
					return nil, err
				}
				continue
			}
			noteEvent(r.Method, r.Params)
			continue
		}
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		return r.Result, nil
	}
}

// answerPaused answers a request the Fetch domain held (-trace-fixture):
// the trace's JSON form with the fixture, anything else passed on.  It is
// sent while call() waits for another reply: its own reply, under an id
// call() does not wait for, is skipped there as an event.
func (c *cdp) answerPaused(params json.RawMessage) error {
	var p struct {
		RequestID string `json:"requestId"`
		Request   struct {
			URL string `json:"url"`
		} `json:"request"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return err
	}
	c.sideID++
	msg := map[string]any{"id": 1000000 + c.sideID, "sessionId": c.session,
		"method": "Fetch.continueRequest",
		"params": map[string]any{"requestId": p.RequestID}}
	if strings.Contains(p.Request.URL, "format=json") {
		c.traceURLs = append(c.traceURLs, p.Request.URL)
		msg["method"] = "Fetch.fulfillRequest"
		msg["params"] = map[string]any{"requestId": p.RequestID,
			"responseCode": 200,
			"responseHeaders": []map[string]string{
				{"name": "Content-Type", "value": "application/json"}},
			"body": base64.StdEncoding.EncodeToString(c.fixture)}
	}
	b, _ := json.Marshal(msg)
	_, err := c.in.Write(append(b, 0))
	return err
}

// The page's errors, as "LEVEL TEXT": console.error calls, uncaught
// exceptions, and the browser's own log (a failed load).
var consoleErrors []string

func noteEvent(method string, params json.RawMessage) {
	switch method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(params, &p) == nil && (p.Type == "error" || p.Type == "assert") {
			text := ""
			for _, a := range p.Args {
				text += fmt.Sprint(a.Value, a.Description) + " "
			}
			consoleErrors = append(consoleErrors, "error "+text)
		}
	case "Runtime.exceptionThrown":
		var p struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		json.Unmarshal(params, &p)
		consoleErrors = append(consoleErrors, "exception "+p.Details.Text+" "+
			p.Details.Exception.Description)
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Level string `json:"level"`
				Text  string `json:"text"`
				URL   string `json:"url"`
			} `json:"entry"`
		}
		if json.Unmarshal(params, &p) == nil && p.Entry.Level == "error" {
			consoleErrors = append(consoleErrors, "log "+p.Entry.Text+" "+p.Entry.URL)
		}
	}
}

// eval runs a JavaScript expression (awaiting a promise) and decodes its
// value into v.
func (c *cdp) eval(expr string, v any) error {
	res, err := c.call("Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true})
	if err != nil {
		return err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("page: %s %s", r.ExceptionDetails.Text,
			r.ExceptionDetails.Exception.Description)
	}
	return json.Unmarshal(r.Result.Value, v)
}

// waitFor is a page-side poll: resolves with fn()'s value once it is
// truthy, rejects after ms milliseconds.
func waitFor(fn string, ms int) string {
	return fmt.Sprintf(`new Promise((resolve, reject) => {
  const end = Date.now() + %d;
  const poll = () => {
    const v = (%s)();
    if (v) resolve(v);
    else if (Date.now() > end) reject(new Error('timed out: ' + %q));
    else setTimeout(poll, 50);
  };
  poll();
})`, ms, fn, fn)
}

// The rows of a labels view, as [key, value, text of column col].
func labelRows(view string, col int) string {
	return fmt.Sprintf(`() => {
  const rows = [...document.querySelectorAll('#%s tr[data-key]')];
  return rows.length ? rows.map(r => [r.dataset.key, r.dataset.value,
                                      r.cells[%d].textContent]) : null;
}`, view, col)
}

// printWhose prints the rows of a labels view's table of whose its
// threads or samples are: "whose NAME labelled|unlabelled|cpprof COUNT".
func (c *cdp) printWhose(name, view string) error {
	var rows [][]string
	if err := c.eval(fmt.Sprintf(`[...document.querySelectorAll('#%s tr[data-whose]')]
  .map(r => [r.dataset.whose, r.cells[1].textContent])`, view), &rows); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Printf("whose %s %s %s\n", name, r[0], r[1])
	}
	return nil
}

func (c *cdp) viewport(width, height int, mobile bool) error {
	_, err := c.call("Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1,
		"mobile": mobile})
	return err
}

// screenshot saves the whole page at the given width.
func (c *cdp) screenshot(path string, width int, mobile bool) error {
	if err := c.viewport(width, 800, mobile); err != nil {
		return err
	}
	var height int
	if err := c.eval(`document.documentElement.scrollHeight`, &height); err != nil {
		return err
	}
	var scroll int
	if err := c.eval(`document.documentElement.scrollWidth`, &scroll); err != nil {
		return err
	}
	if scroll > width {
		fmt.Printf("overflow %d %d\n", width, scroll)
	}
	if err := c.viewport(width, height, mobile); err != nil {
		return err
	}
	res, err := c.call("Page.captureScreenshot", map[string]any{"format": "png"})
	if err != nil {
		return err
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// Page-side helpers for the flame checks: set a control as a user would
// (value, then the event the page listens to), and load a profile with the
// Show button, resolving once it is drawn (or the status says why not).
const flameHelpers = `
window.bcSet = (id, value, event) => {
  const e = document.getElementById(id);
  if (e.type === 'checkbox') e.checked = value; else e.value = value;
  e.dispatchEvent(new Event(event || 'change'));
};
window.bcShow = (name, seconds) => new Promise((resolve, reject) => {
  const canvas = document.getElementById('flame-canvas');
  delete canvas.dataset.renderMs;
  bcSet('flame-profile', name);
  document.getElementById('flame-seconds').value = String(seconds);
  document.getElementById('flame-load').click();
  const poll = () => {
    const status = document.getElementById('flame-status');
    if (canvas.dataset.renderMs) resolve(canvas.dataset.renderMs);
    else if (status.classList.contains('error')) reject(new Error(status.textContent));
    else setTimeout(poll, 50);
  };
  poll();
});
window.bcText = id => document.getElementById(id).textContent;
window.bcData = (id, key) => document.getElementById(id).dataset[key];
true`

// flameChecks works the flame-graph views and prints what they show.
func (c *cdp) flameChecks(cpuSeconds int, protoFile, note string) error {
	var ok bool
	if err := c.eval(flameHelpers, &ok); err != nil {
		return err
	}
	quoted, _ := json.Marshal(note)
	// The threads view, filtered by the odd label value.
	var noteOut []any
	if err := c.eval(fmt.Sprintf(`bcShow('goroutine', 1).then(() => {
  bcSet('flame-filter', 'note=' + %s);
  const offered = [...document.querySelectorAll('#flame-labels option')]
    .some(o => o.value === 'note=' + %s);
  return [bcData('flame-canvas', 'rootValue'), offered,
          document.querySelectorAll('script').length];
})`, quoted, quoted), &noteOut); err != nil {
		return err
	}
	fmt.Printf("flame note %v %v %v\n", noteOut[0], noteOut[1], noteOut[2])
	// The heap view, which carries no labels, asked for a tenant.
	var heapMsg string
	// A heap profile the server declines (a sanitizer's malloc comes
	// first) is shown as the server's reason: "declined: REASON".
	if err := c.eval(`bcShow('heap', 1).then(() => {
  bcSet('flame-filter', 'tenant=acme');
  return document.getElementById('flame-graph').hidden ? bcText('flame-message') : 'graph shown';
}, err => 'declined: ' + err.message)`, &heapMsg); err != nil {
		return err
	}
	fmt.Printf("flame heap %s\n", heapMsg)
	// A wall window: every thread's time on CPU or off, then initech's.
	var wall []string
	if err := c.eval(`bcShow('wall', 1).then(() => {
  bcSet('flame-filter', '');
  const t = [...document.querySelectorAll('#flame-type option')]
    .find(o => o.textContent === 'wall (nanoseconds)');
  if (!t) return ['0', '0', 'no wall type'];
  bcSet('flame-type', t.value);
  const all = bcData('flame-canvas', 'rootValue');
  bcSet('flame-filter', 'tenant=initech');
  return [all, bcData('flame-canvas', 'rootValue'), t.textContent];
})`, &wall); err != nil {
		return err
	}
	fmt.Printf("flame wall %s %s %s\n", wall[0], wall[1], wall[2])
	// A CPU window: all samples, counted in samples.
	var cpu []string
	if err := c.eval(fmt.Sprintf(`bcShow('profile', %d).then(ms => {
  bcSet('flame-filter', '');
  const t = [...document.querySelectorAll('#flame-type option')]
    .find(o => o.textContent.startsWith('samples '));
  bcSet('flame-type', t.value);
  return [bcData('flame-canvas', 'rootValue'), bcData('flame-canvas', 'drawn'), ms];
})`, cpuSeconds), &cpu); err != nil {
		return err
	}
	fmt.Printf("flame cpu %s %s %s\n", cpu[0], cpu[1], cpu[2])
	// The profile shown, as its download link gives it.
	var proto string
	if err := c.eval(`fetch(document.getElementById('flame-download').href)
  .then(r => r.arrayBuffer()).then(b => {
    let s = '';
    for (const x of new Uint8Array(b)) s += String.fromCharCode(x);
    return btoa(s);
  })`, &proto); err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(proto)
	if err != nil {
		return err
	}
	if err := os.WriteFile(protoFile, raw, 0o644); err != nil {
		return err
	}
	var out []string
	if err := c.eval(`(() => {
  bcSet('flame-filter', 'tenant=initech');
  const root = bcData('flame-canvas', 'rootValue');
  bcSet('flame-search', 'decode_block', 'input');
  return [root, bcData('flame-found', 'share') || '0', bcText('flame-found')];
})()`, &out); err != nil {
		return err
	}
	fmt.Printf("flame initech %s\nflame search %s %s\n", out[0], out[1], out[2])
	// Hover over the widest frame above the root, then click it: it is
	// zoomed.
	if err := c.eval(`(() => {
  const canvas = document.getElementById('flame-canvas');
  const r = cpprofFlame.rects.filter(r => r.depth === 1)
    .reduce((a, b) => (b.w > a.w ? b : a));
  const box = canvas.getBoundingClientRect();
  const at = {clientX: box.left + r.x + r.w / 2, clientY: box.top + r.y + 5, bubbles: true};
  canvas.dispatchEvent(new MouseEvent('mousemove', at));
  const hover = bcText('flame-detail');
  canvas.dispatchEvent(new MouseEvent('click', at));
  return [String(cpprofFlame.view.zoom === r.node && r.node > 0), hover];
})()`, &out); err != nil {
		return err
	}
	fmt.Printf("flame zoom %s %s\n", out[0], out[1])
	if err := c.eval(`(() => {
  bcSet('flame-search', '', 'input');
  bcSet('flame-a', 'tenant=acme');
  bcSet('flame-b', 'tenant=initech');
  bcSet('flame-mode', 'diff');
  const drawn = document.getElementById('flame-graph').hidden ? '0' : bcData('flame-canvas', 'drawn');
  return [drawn, bcText('flame-message')];
})()`, &out); err != nil {
		return err
	}
	fmt.Printf("flame diff %s %s\n", out[0], out[1])
	if err := c.eval(`(() => {
  bcSet('flame-mode', 'top');
  const rows = document.querySelectorAll('#flame-top-body tr');
  return [String(rows.length), rows.length ? rows[0].cells[5].textContent : '-'];
})()`, &out); err != nil {
		return err
	}
	fmt.Printf("flame top %s %s\n", out[0], out[1])
	// On screen for the screenshots: initech's graph, decode_block found.
	return c.eval(`(() => {
  bcSet('flame-mode', 'graph');
  bcSet('flame-search', 'decode_block', 'input');
  return true;
})()`, &ok)
}

// bench shows PROFILE's flame graph `runs` times and prints the timings.
func (c *cdp) bench(profile string, runs int) error {
	var ok bool
	if err := c.eval(flameHelpers, &ok); err != nil {
		return err
	}
	for i := 0; i < runs; i++ {
		var out []any
		if err := c.eval(fmt.Sprintf(`bcShow(%q, 1).then(() => [
  bcData('flame-canvas', 'responseMs'), bcData('flame-canvas', 'renderMs'),
  bcData('flame-canvas', 'drawn'), cpprofFlame.prof.samples.length])`, profile), &out); err != nil {
			return err
		}
		fmt.Printf("bench %s %v %v %v %v\n", profile, out[0], out[1], out[2], out[3])
	}
	return nil
}

// killBrowser kills chromium's process group: the browser and every
// process it started.
func killBrowser() {
	syscall.Kill(-browser.Process.Pid, syscall.SIGKILL)
}

// removeProfile removes chromium's profile directory, again while a
// renderer still dying writes to it, for at most 5 s.
func removeProfile(dir string) {
	for try := 0; try < 50; try++ {
		if os.RemoveAll(dir) == nil {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startBrowser starts headless chromium and attaches to a blank page; stop
// kills it and removes its profile directory.
func startBrowser(insecure bool) (c *cdp, stop func(), err error) {
	profileDir, err := os.MkdirTemp("", "browsercheck")
	if err != nil {
		return nil, nil, err
	}
	cmdR, cmdW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	args := []string{"--headless", "--no-sandbox",
		"--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--hide-scrollbars", "--remote-debugging-pipe",
		"--user-data-dir=" + profileDir}
	if insecure {
		args = append(args, "--ignore-certificate-errors")
	}
	browser = exec.Command("chromium", append(args, "about:blank")...)
	browser.ExtraFiles = []*os.File{cmdR, outW} // fds 3 and 4
	// Its own process group, so that its renderers die with it: killed
	// alone, they went on writing to the profile directory as it was
	// removed, and /tmp kept one in three.
	browser.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := browser.Start(); err != nil {
		os.RemoveAll(profileDir)
		return nil, nil, fmt.Errorf("chromium: %v (apt-get install chromium)", err)
	}
	cmdR.Close()
	outW.Close()
	stop = func() {
		killBrowser()
		browser.Wait()
		removeProfile(profileDir)
	}
	c = &cdp{in: cmdW, out: bufio.NewReader(outR)}

	res, err := c.call("Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		stop()
		return nil, nil, err
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	json.Unmarshal(res, &target)
	res, err = c.call("Target.attachToTarget", map[string]any{
		"targetId": target.TargetID, "flatten": true})
	if err != nil {
		stop()
		return nil, nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(res, &attached)
	c.session = attached.SessionID
	for _, domain := range []string{"Runtime.enable", "Log.enable"} {
		if _, err := c.call(domain, nil); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return c, stop, nil
}

// framed plays a site the user visits: it serves, from another origin
// (127.0.0.2, a port of its own), a page holding url (the index with a
// #cpu=N) in a frame the user cannot see, opens that page, and waits for
// the frame's load event, by which the framed page's scripts have run (or
// the browser refused to show it).  Then it reads the server's index JSON
// (the "profiler" object's windows_open) every 100 ms for watch seconds, or
// until a window is open, and prints
//
//	framed loaded ORIGIN     the frame's load event came, on ORIGIN's page
//	framed windows N         the most windows the server had open
//	console LEVEL TEXT       per error logged (the browser's refusal)
func framed(c *cdp, url string, watch int) error {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	page := `<!DOCTYPE html><title>another site</title><p>Nothing to see here.
<iframe src="` + html.EscapeString(url) + `" onload="window.framedLoaded = true"
 style="width:1px;height:1px;border:0;opacity:0"></iframe>`
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))
	origin := "http://" + ln.Addr().String()
	if _, err := c.call("Page.navigate", map[string]any{"url": origin + "/"}); err != nil {
		return err
	}
	var loaded bool
	if err := c.eval(waitFor(`() => window.framedLoaded`, 20000), &loaded); err != nil {
		return err
	}
	fmt.Printf("framed loaded %s\n", origin)
	index, err := neturl.Parse(url)
	if err != nil {
		return err
	}
	index.Fragment = ""
	index.RawQuery = "format=json"
	most := 0
	for end := time.Now().Add(time.Duration(watch) * time.Second); most == 0 && time.Now().Before(end); {
		open, err := windowsOpen(index.String())
		if err != nil {
			return err
		}
		if open > most {
			most = open
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("framed windows %d\n", most)
	for _, e := range consoleErrors {
		fmt.Printf("console %s\n", strings.ReplaceAll(e, "\n", " "))
	}
	return nil
}

// windowsOpen reads how many windows the server has open from its index
// JSON.
func windowsOpen(index string) (int, error) {
	resp, err := http.Get(index)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var j struct {
		Profiler struct {
			WindowsOpen *int `json:"windows_open"`
		} `json:"profiler"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || j.Profiler.WindowsOpen == nil {
		return 0, fmt.Errorf("%s: no profiler.windows_open (%v)", index, err)
	}
	return *j.Profiler.WindowsOpen, nil
}

func run(url, shots string, cpuSeconds int, insecure bool, protoFile, note, benchProfile string, runs int) error {
	c, stop, err := startBrowser(insecure)
	if err != nil {
		return err
	}
	defer stop()

	if err := c.viewport(1400, 1000, false); err != nil {
		return err
	}
	if _, err := c.call("Page.navigate", map[string]any{"url": url}); err != nil {
		return err
	}
	var profiles [][]string
	// Only once the page is parsed: while it still loads, the table may
	// hold its first rows only (CI read 7 of 9 so).
	if err := c.eval(waitFor(`() => {
  if (document.readyState === 'loading') return null;
  const rows = [...document.querySelectorAll('tr[data-profile]')];
  return rows.length ? rows.map(r => [r.dataset.profile, r.cells[0].textContent]) : null;
}`, 10000), &profiles); err != nil {
		return err
	}
	for _, p := range profiles {
		fmt.Printf("profile %s %s\n", p[0], p[1])
	}
	if benchProfile != "" {
		return c.bench(benchProfile, runs)
	}
	var threads [][]string
	if err := c.eval(waitFor(labelRows("census", 1), 10000), &threads); err != nil {
		return err
	}
	for _, t := range threads {
		fmt.Printf("threads %s %s %s\n", t[0], t[1], t[2])
	}
	if err := c.printWhose("threads", "census"); err != nil {
		return err
	}
	// The tasks view comes from the same fetch as the threads view.
	var tasks [][]string
	if err := c.eval("("+labelRows("tasks", 1)+")()", &tasks); err != nil {
		return err
	}
	for _, t := range tasks {
		fmt.Printf("tasks %s %s %s\n", t[0], t[1], t[2])
	}
	// What the CPU form holds before anyone presses it: a #cpu=N in the
	// page's address may fill in the seconds but must start nothing.
	var form []string
	if err := c.eval(`[document.getElementById('cpu-seconds').value,
  document.getElementById('cpu-start').disabled ? 'busy' : 'ready',
  document.getElementById('cpu-status').textContent]`, &form); err != nil {
		return err
	}
	fmt.Printf("cpuform %s %s %s\n", form[0], form[1], form[2])
	// Press the button, as a user would.
	var ok bool
	if err := c.eval(fmt.Sprintf(`(() => {
  document.getElementById('cpu-seconds').value = '%d';
  document.getElementById('cpu-start').click();
  return true;
})()`, cpuSeconds), &ok); err != nil {
		return err
	}
	var cpu [][]string
	if err := c.eval(waitFor(labelRows("cpu", 2), 1000*(cpuSeconds+15)), &cpu); err != nil {
		return err
	}
	var counts [][]string
	if err := c.eval("("+labelRows("cpu", 1)+")()", &counts); err != nil {
		return err
	}
	for i, r := range cpu {
		fmt.Printf("cpu %s %s %s %s\n", r[0], r[1], strings.TrimSuffix(r[2], "%"), counts[i][2])
	}
	if err := c.printWhose("cpu", "cpu"); err != nil {
		return err
	}
	var cpuNote string
	if err := c.eval(`document.querySelector('#cpu p.note').textContent`, &cpuNote); err != nil {
		return err
	}
	fmt.Printf("cputotal %s\n", strings.Fields(cpuNote+" ?")[0])
	if protoFile != "" {
		// CPU beside wall over one window, per label value.
		var compare [][]string
		if err := c.eval(`(() => {
  document.getElementById('cpu-seconds').value = '1';
  document.getElementById('compare-start').click();
  return true;
})()`, &ok); err != nil {
			return err
		}
		if err := c.eval(waitFor(`() => {
  const rows = [...document.querySelectorAll('#cpu table.compare tbody tr')];
  return rows.length ? rows.map(r => [r.dataset.key, r.dataset.value,
    r.cells[1].dataset.share, r.cells[2].dataset.share]) : null;
}`, 20000), &compare); err != nil {
			return err
		}
		for _, r := range compare {
			fmt.Printf("compare %s %s %s %s\n", r[0], r[1], r[2], r[3])
		}
		if err := c.flameChecks(cpuSeconds, protoFile, note); err != nil {
			return err
		}
	}
	if err := c.screenshot(filepath.Join(shots, "phone.png"), 390, true); err != nil {
		return err
	}
	if err := c.screenshot(filepath.Join(shots, "wide.png"), 1400, false); err != nil {
		return err
	}
	for _, e := range consoleErrors {
		fmt.Printf("console %s\n", strings.ReplaceAll(e, "\n", " "))
	}
	c.session = ""
	c.call("Browser.close", nil)
	return nil
}

// Page-side helpers for the trace checks: hover the widest event the pick
// accepts, as the pointer would, and say what the tooltip shows.
const traceHelpers = `
window.btHover = pick => {
  const canvas = document.getElementById('trace-canvas');
  const box = canvas.getBoundingClientRect();
  let best = null;
  cpprofTrace.hits.forEach(rows => rows.forEach((hits, row) => {
    for (const h of hits)
      if (pick(h.item.e, row) && (!best || h.x1 - h.x0 > best.x1 - best.x0)) best = h;
  }));
  if (!best) return ['none', ''];
  canvas.dispatchEvent(new MouseEvent('mousemove', {bubbles: true,
    clientX: box.left + (best.x0 + best.x1) / 2, clientY: box.top + best.y + best.h / 2}));
  const tip = document.getElementById('trace-tip');
  const labels = (best.item.e.args && best.item.e.args.labels) || {};
  const pairs = Object.keys(labels).sort().map(k => k + '=' + labels[k]).join(' ');
  return [pairs || '-', tip.hidden ? '' : tip.textContent.replace(/\n/g, ' | ')];
};
window.btValues = (spans, key) =>
  [...new Set(spans.map(s => ((s.e.args && s.e.args.labels) || {})[key])
    .filter(v => v !== undefined))].sort().join(',') || '-';
true`

// traceChecks presses "Trace" for SECONDS and prints what the timeline
// view drew:
//
//	trace request URL               with -trace-fixture: each request the
//	                                fixture answered
//	trace other DROPPED CPU TEXT    otherData's dropped and cpu_samples as
//	                                the view read them, and its notes
//	trace lane TID SPANS DRAWN BARS TICKS TENANTS KINDS NAME
//	                                per lane drawn (cpprof's own threads
//	                                are not, by default): its label spans (and task
//	                                runs), those drawn, its regions and
//	                                lock waits, its instants, the tenant
//	                                and kind values of its spans (a,b or -)
//	trace keys SELECTED KEY...      the "Colour by" choices
//	trace legend VALUE...           the legend's values for SELECTED
//	trace hover LABELS | TOOLTIP    the widest label span with a tenant:
//	                                its labels (k=v ...), then the tooltip
//	                                hovering it
//	                                showed, lines joined by " | "
//	trace job TOOLTIP               the same for the widest job's span (kind
//	                                reindex or export, as the demo's
//	                                workers run them)
//	trace lockwait TOOLTIP          the same for the widest lock wait
//	trace cpusample TOOLTIP         and for a CPU sample ("none" if none)
//	trace task TOOLTIP              and for a task's run on its lane
//	trace zoom FULL WHEEL PANNED PANWIDTH RESET DRAG WANT SELECT RULER
//	                                the view's width in µs at first, after
//	                                a wheel zoom, how far shift+wheel moved
//	                                it and its width then, after "Reset
//	                                zoom", after dragging across 200 px
//	                                (WANT: what 200 px were), whether the
//	                                selection was shown, how far a drag
//	                                along the ruler moved it
//	trace flight ok|error TEXT      what the "Flight recorder" button
//	                                showed in its status (then, with
//	                                -trace-fixture, its request)
//	trace nocpu TEXT                the notes for a trace without CPU
//	                                samples
func (c *cdp) traceChecks(seconds int, shots string) error {
	var ok bool
	if err := c.eval(traceHelpers, &ok); err != nil {
		return err
	}
	if err := c.eval(fmt.Sprintf(`new Promise((resolve, reject) => {
  const canvas = document.getElementById('trace-canvas');
  document.getElementById('trace-seconds').value = '%d';
  document.getElementById('trace-seconds').dispatchEvent(new Event('input'));
  document.getElementById('trace-load').click();
  const poll = () => {
    const status = document.getElementById('trace-status');
    if (canvas.dataset.lanes) resolve(true);
    else if (status.classList.contains('error')) reject(new Error(status.textContent));
    else setTimeout(poll, 50);
  };
  poll();
})`, seconds), &ok); err != nil {
		return err
	}
	for _, u := range c.traceURLs {
		fmt.Printf("trace request %s\n", u)
	}
	var other []string
	if err := c.eval(`(() => {
  const n = document.getElementById('trace-notes');
  const text = [...n.children].map(p => p.textContent).join(' ');
  return [n.dataset.dropped, n.dataset.cpuSamples, text.replace(/\s+/g, ' ')];
})()`, &other); err != nil {
		return err
	}
	fmt.Printf("trace other %s %s %s\n", other[0], other[1], other[2])
	var lanes [][]string
	if err := c.eval(`cpprofTrace.lanes.map((l, i) => [String(l.tid),
  String(l.spans.length), String(cpprofTrace.hits[i][0].length),
  String(l.bars.length), String(l.ticks.length),
  btValues(l.spans, 'tenant'), btValues(l.spans, 'kind'), l.label])`, &lanes); err != nil {
		return err
	}
	for _, l := range lanes {
		fmt.Printf("trace lane %s\n", strings.Join(l, " "))
	}
	var keys []string
	if err := c.eval(`[document.getElementById('trace-key').value,
  ...[...document.querySelectorAll('#trace-key option')].map(o => o.value)]`, &keys); err != nil {
		return err
	}
	fmt.Printf("trace keys %s\n", strings.Join(keys, " "))
	var legend []string
	if err := c.eval(`[...document.querySelectorAll('#trace-legend li[data-value]')]
  .map(li => li.dataset.value)`, &legend); err != nil {
		return err
	}
	fmt.Printf("trace legend %s\n", strings.Join(legend, " "))
	var hover []string
	for _, h := range []struct{ name, pick string }{
		{"hover", `(e, row) => row === 0 && e.cat === 'labels' && e.args && e.args.labels &&
  e.args.labels.tenant`},
		{"job", `(e, row) => row === 0 && e.cat === 'labels' && e.args && e.args.labels &&
  /^(reindex|export)$/.test(e.args.labels.kind)`},
		{"lockwait", `(e, row) => row === 1 && (e.cat === 'mutex' || e.cat === 'block')`},
		{"cpusample", `(e, row) => row === 2 && e.cat === 'cpu'`},
		{"task", `(e, row) => row === 0 && e.cat === 'task'`},
	} {
		if err := c.eval("btHover("+h.pick+")", &hover); err != nil {
			return err
		}
		if h.name == "hover" {
			fmt.Printf("trace hover %s | %s\n", hover[0], hover[1])
		} else if hover[0] == "none" {
			fmt.Printf("trace %s none\n", h.name)
		} else {
			fmt.Printf("trace %s %s\n", h.name, hover[1])
		}
	}
	// On screen for the screenshot: the tooltip of the widest span.
	if err := c.eval(`btHover((e, row) => row === 0 && e.cat === 'labels')`, &hover); err != nil {
		return err
	}
	var rect []float64
	if err := c.eval(`(() => {
  const r = document.getElementById('trace').getBoundingClientRect();
  return [r.left + scrollX, r.top + scrollY, r.width, r.height];
})()`, &rect); err != nil {
		return err
	}
	res, err := c.call("Page.captureScreenshot", map[string]any{"format": "png",
		"captureBeyondViewport": true, "clip": map[string]any{"x": rect[0],
			"y": rect[1], "width": rect[2], "height": rect[3], "scale": 1}})
	if err != nil {
		return err
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(shots, "trace.png"), png, 0o644); err != nil {
		return err
	}
	var zoom []string
	if err := c.eval(`(() => {
  const canvas = document.getElementById('trace-canvas');
  const box = canvas.getBoundingClientRect(), g = cpprofTrace.layout.GUTTER_PX;
  const width = () => Number(canvas.dataset.t1) - Number(canvas.dataset.t0);
  const t0 = () => Number(canvas.dataset.t0);
  const y = box.top + cpprofTrace.layout.RULER_PX + 10, ruler = box.top + 5;
  const mid = box.left + (g + box.width) / 2;
  const wheel = (deltaY, shiftKey) => canvas.dispatchEvent(new WheelEvent('wheel',
    {deltaY, shiftKey, clientX: mid, clientY: y, bubbles: true, cancelable: true}));
  const mouse = (type, x, y) => canvas.dispatchEvent(new MouseEvent(type,
    {clientX: x, clientY: y, button: 0, bubbles: true}));
  const full = width();
  wheel(-400, false);
  const zoomed = width(), before = t0();
  wheel(100, true);
  const panned = t0() - before, panWidth = width();
  document.getElementById('trace-reset').click();
  const reset = width();
  const x0 = box.left + g + 100, x1 = box.left + g + 300;
  mouse('mousedown', x0, y);
  mouse('mousemove', x1, y);
  const selected = !document.getElementById('trace-select').hidden;
  mouse('mouseup', x1, y);
  const drag = width(), want = full * 200 / (box.width - g);
  const rulerBefore = t0();
  mouse('mousedown', x1, ruler);
  mouse('mousemove', x0, ruler);
  mouse('mouseup', x0, ruler);
  const rulerPan = t0() - rulerBefore;
  document.getElementById('trace-reset').click();
  return [full, zoomed, panned, panWidth, reset, drag, want, selected, rulerPan].map(String);
})()`, &zoom); err != nil {
		return err
	}
	fmt.Printf("trace zoom %s\n", strings.Join(zoom, " "))
	// The flight recorder's button: the last seconds at once, or the
	// server's word that the recorder is off.
	asked := len(c.traceURLs)
	var flight []string
	if err := c.eval(`new Promise(resolve => {
  const b = document.getElementById('trace-flight'), s = document.getElementById('trace-status');
  b.click();
  const poll = () => {
    if (!b.disabled) resolve([s.classList.contains('error') ? 'error' : 'ok', s.textContent]);
    else setTimeout(poll, 50);
  };
  poll();
})`, &flight); err != nil {
		return err
	}
	for _, u := range c.traceURLs[asked:] {
		fmt.Printf("trace request %s\n", u)
	}
	fmt.Printf("trace flight %s %s\n", flight[0], flight[1])
	var nocpu string
	if err := c.eval(`(() => {
  cpprofTrace.show(JSON.stringify({traceEvents: [], displayTimeUnit: 'ns',
    otherData: {dropped: 0, cpu_samples: false, flight: false, start_ns: 0, end_ns: 1e9}}));
  const notes = document.getElementById('trace-notes').children;
  return [...notes].map(p => p.textContent).join(' ').replace(/\s+/g, ' ');
})()`, &nocpu); err != nil {
		return err
	}
	fmt.Printf("trace nocpu %s\n", nocpu)
	return nil
}

// runTrace opens the page and works its timeline view only (-trace).
func runTrace(url, shots string, seconds int, insecure bool, fixture string) error {
	c, stop, err := startBrowser(insecure)
	if err != nil {
		return err
	}
	defer stop()
	if fixture != "" {
		if c.fixture, err = os.ReadFile(fixture); err != nil {
			return err
		}
		if _, err := c.call("Fetch.enable", map[string]any{"patterns": []map[string]any{
			{"urlPattern": "*/debug/pprof/trace?*"}}}); err != nil {
			return err
		}
	}
	if err := c.viewport(1400, 1000, false); err != nil {
		return err
	}
	if _, err := c.call("Page.navigate", map[string]any{"url": url}); err != nil {
		return err
	}
	if err := c.eval(waitFor(`() => document.readyState === 'complete' && window.cpprofTrace`, 10000), new(any)); err != nil {
		return err
	}
	if err := c.traceChecks(seconds, shots); err != nil {
		return err
	}
	for _, e := range consoleErrors {
		fmt.Printf("console %s\n", strings.ReplaceAll(e, "\n", " "))
	}
	c.session = ""
	c.call("Browser.close", nil)
	return nil
}

func runFramed(url string, watch int) error {
	c, stop, err := startBrowser(false)
	if err != nil {
		return err
	}
	defer stop()
	return framed(c, url, watch)
}

func main() {
	url := flag.String("url", "", "the index page")
	shots := flag.String("shots", ".", "directory for phone.png and wide.png")
	cpu := flag.Int("cpu", 2, "seconds of the CPU view")
	insecure := flag.Bool("insecure", false, "accept any server certificate")
	flame := flag.Bool("flame", false, "work the flame-graph views too")
	protoFile := flag.String("proto", "", "with -flame: where to save the CPU profile shown")
	note := flag.String("note", "", "with -flame: the demo's note label value")
	benchProfile := flag.String("bench", "", "only time PROFILE's flame graph")
	frame := flag.Bool("framed", false, "only open URL in another site's hidden frame")
	watch := flag.Int("watch", 10, "with -framed: seconds to watch for a window")
	runs := flag.Int("runs", 3, "with -bench: how many times")
	traceSeconds := flag.Int("trace", 0, "only work the timeline view, tracing SECONDS")
	fixture := flag.String("trace-fixture", "", "with -trace: answer the trace requests with FILE")
	flag.Parse()
	if *url == "" || (*flame && *protoFile == "") {
		fmt.Fprintln(os.Stderr, "usage: browsercheck -url URL -shots DIR [-cpu SECONDS] [-insecure] [-flame -proto FILE -note TEXT] | -url URL -bench PROFILE [-runs N] | -framed -url URL [-watch SECONDS] | -url URL -trace SECONDS -shots DIR [-trace-fixture FILE]")
		os.Exit(2)
	}
	done := make(chan error, 1)
	if !*flame {
		*protoFile = ""
	}
	go func() {
		if *frame {
			done <- runFramed(*url, *watch)
		} else if *traceSeconds > 0 {
			done <- runTrace(*url, *shots, *traceSeconds, *insecure, *fixture)
		} else {
			done <- run(*url, *shots, *cpu, *insecure, *protoFile, *note, *benchProfile, *runs)
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "browsercheck:", err)
			os.Exit(1)
		}
	case <-time.After(time.Duration(2**cpu+*traceSeconds+*watch+90) * time.Second):
		fmt.Fprintln(os.Stderr, "browsercheck: no answer from the browser in time")
		if browser != nil && browser.Process != nil {
			killBrowser()
		}
		os.Exit(1)
	}
}
