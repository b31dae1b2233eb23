// Preloaded into every test process (package.json "tap" → "node-arg"): fetch (and viem's http transport, which uses
// it) closes a kept-alive connection 100 ms after its last answer instead of undici's 4 s. A test's last request
// otherwise holds the in-process daemon's uWS socket open, and the finished test process with it, for up to 4 s,
// while it keeps one of the runner's job slots. Only the test client's side changes; the daemon's own node client and
// keep-alive behaviour are untouched (tests of keep-alive use their own agents or sockets).
import { Agent, setGlobalDispatcher } from 'undici';

setGlobalDispatcher(new Agent({ keepAliveTimeout: 100, keepAliveMaxTimeout: 100 }));
