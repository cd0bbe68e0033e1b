// rhea (npm) as an AMQP 1.0 peer for the tests and bench: a small broker,
// a sender and a receiver.  One JSON line on stdout says what happened.
//
//   node rhea_peer_1_0.js server  [--port 0] [--tls-cert F --tls-key F]  -> {"listening": PORT}
//   node rhea_peer_1_0.js send    --port P --address A --count N [--size S] [--settled]
//   node rhea_peer_1_0.js receive --port P --address A --count N [--credit C]
//   node rhea_peer_1_0.js request --port P --count N   (to a dynamic node and back)
//   node rhea_peer_1_0.js durable --port P --address A --container C --name L --take K
//        [--hold H] [--publish M] [--resume N] [--end]   (a durable subscription)
//
// The server keeps one FIFO queue per address (created on first use),
// hands messages round-robin to receiving links as credit allows, keeps
// an unsettled delivery until its outcome (accepted drops it, released and
// modified put it back at the head), answers a dynamic source with a fresh
// address, and lets a message be consumed by whoever attaches to its `to`
// when the link's target is null (anonymous relay).
'use strict';
const rhea = require('rhea');

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) continue;
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) out[a.slice(2)] = true;
    else { out[a.slice(2)] = next; i++; }
  }
  return out;
}

const mode = process.argv[2];
const opt = args(process.argv.slice(3));
const host = opt.host || '127.0.0.1';
const port = Number(opt.port || 0);
const count = Number(opt.count || 1);
const size = Number(opt.size || 100);

function report(obj) {
  const cpu = process.cpuUsage();
  obj.cpu = (cpu.user + cpu.system) / 1e6;
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function connectOptions() {
  const o = { host, port, reconnect: false, container_id: 'rhea-' + mode };
  if (opt.username) { o.username = opt.username; o.password = opt.password || ''; }
  if (opt['max-frame-size']) o.max_frame_size = Number(opt['max-frame-size']);
  return o;
}

// ---------------------------------------------------------------- server
function server() {
  const container = rhea.create_container({ id: 'rhea-server' });
  const queues = new Map();   // address -> array of messages
  const consumers = new Map(); // address -> array of sender links
  let dynamicSeq = 0;
  // a terminus as plain fields (rhea's decoded composites keep them on getters)
  const TERMINUS = ['address', 'durable', 'expiry_policy', 'timeout', 'dynamic',
    'dynamic_node_properties', 'distribution_mode', 'filter', 'default_outcome', 'outcomes',
    'capabilities'];
  const fields = (t) => {
    const o = {};
    if (t) for (const k of TERMINUS) if (t[k] !== undefined && t[k] !== null) o[k] = t[k];
    return o;
  };
  const queue = (a) => { if (!queues.has(a)) queues.set(a, []); return queues.get(a); };
  const links = (a) => { if (!consumers.has(a)) consumers.set(a, []); return consumers.get(a); };

  function dispatch(address) {
    const q = queue(address);
    const ls = links(address);
    let progress = true;
    while (q.length && ls.length && progress) {
      progress = false;
      for (let i = 0; i < ls.length && q.length; i++) {
        const s = ls[0];
        ls.push(ls.shift());
        if (s.sendable()) {
          const m = q.shift();
          const d = s.send(m);
          d.held = { address, message: m };
          if (!s.held) s.held = new Set();
          s.held.add(d);
          progress = true;
        }
      }
    }
  }

  container.on('sender_open', (ctx) => {
    // an incoming link's local termini start null (a refusal): echo the peer's
    const src = fields(ctx.sender.source);
    if (src.dynamic) src.address = 'dyn-' + (++dynamicSeq) + '-' + rhea.generate_uuid();
    const address = src.address;
    ctx.sender.set_source(src);
    ctx.sender.set_target(fields(ctx.sender.target));
    ctx.sender.address = address;
    links(address).push(ctx.sender);
    drain(ctx.sender);  // a drain that came with the attach waited for this
  });
  const unlink = (ctx) => {
    const s = ctx.sender;
    if (s && s.address !== undefined) {
      const ls = links(s.address);
      const i = ls.indexOf(s);
      if (i >= 0) ls.splice(i, 1);
    }
  };
  container.on('sender_close', (ctx) => { unlink(ctx); giveBack(ctx.sender); });
  // rhea writes a transfer ahead of its own attach when a link is sendable
  // as it opens (proton then closes: "no such handle"): send on the next turn
  container.on('sendable', (ctx) => setImmediate(() => dispatch(ctx.sender.address)));
  // drain: what the queue holds goes out, then the rest of the credit is used
  // up.  set_drained must run inside rhea's handlers (or right behind a send)
  // for the flow to go out; rhea has no public getter for _draining.
  const drain = (s) => {
    if (!s._draining) return;
    if (!queue(s.address).length) { s.set_drained(true); return; }
    setImmediate(() => { dispatch(s.address); s.set_drained(true); });
  };
  container.on('sender_draining', (ctx) => drain(ctx.sender));
  container.on('receiver_open', (ctx) => {
    const tgt = fields(ctx.receiver.target);
    if (tgt.dynamic) tgt.address = 'dyn-' + (++dynamicSeq) + '-' + rhea.generate_uuid();
    ctx.receiver.set_target(tgt);
    ctx.receiver.set_source(fields(ctx.receiver.source));
    ctx.receiver.local_address = tgt.address;
  });
  container.on('message', (ctx) => {
    const address = ctx.receiver.local_address || ctx.message.to;
    queue(address).push(ctx.message);
    dispatch(address);
  });
  const settle = (d) => { if (d.link && d.link.held) d.link.held.delete(d); delete d.held; };
  const requeue = (ctx) => {
    const held = ctx.delivery.held;
    if (held) queue(held.address).unshift(held.message);
    settle(ctx.delivery);
    if (held) dispatch(held.address);
  };
  container.on('released', requeue);
  container.on('modified', requeue);
  container.on('accepted', (ctx) => settle(ctx.delivery));
  container.on('rejected', (ctx) => settle(ctx.delivery));
  // what a closed link or connection left unsettled goes back, in order
  const giveBack = (link) => {
    if (!link.held) return;
    const back = [...link.held].map((d) => d.held).filter(Boolean);
    link.held.clear();
    const byAddress = new Map();
    for (const h of back) {
      if (!byAddress.has(h.address)) byAddress.set(h.address, []);
      byAddress.get(h.address).push(h.message);
    }
    for (const [a, ms] of byAddress) { queue(a).unshift(...ms); dispatch(a); }
  };
  const forget = (ctx) => {
    // links of a closed or lost connection: forget them
    for (const [, ls] of consumers) {
      for (let i = ls.length - 1; i >= 0; i--) {
        if (ls[i].connection === ctx.connection) giveBack(ls.splice(i, 1)[0]);
      }
    }
  };
  container.on('connection_close', forget);
  container.on('disconnected', forget);
  container.on('error', () => {});
  const listen = { host, port };
  if (opt['tls-cert']) {  // amqps: TLS before the AMQP header
    const fs = require('fs');
    Object.assign(listen, { transport: 'tls', cert: fs.readFileSync(opt['tls-cert']),
      key: fs.readFileSync(opt['tls-key']) });
  }
  const listener = container.listen(listen);
  listener.on('listening', () => report({ listening: listener.address().port }));
  process.on('SIGTERM', () => { listener.close(); process.exit(0); });
}

// ---------------------------------------------------------------- clients
function body(i) {
  const b = Buffer.alloc(size, 0x61);
  b.write(String(i).padStart(10, '0'), 0, 'ascii');
  return b;
}

function send() {
  const container = rhea.create_container();
  const conn = container.connect(connectOptions());
  const settled = Boolean(opt.settled);
  const sender = conn.open_sender({ target: { address: opt.address },
    snd_settle_mode: settled ? 1 : 0 });
  let sent = 0, accepted = 0, rejected = 0, released = 0, t0 = 0;
  const done = () => {
    report({ sent, accepted, rejected, released, seconds: (Date.now() - t0) / 1000 });
    conn.close();
  };
  container.on('sendable', () => {
    if (!t0) t0 = Date.now();
    while (sender.sendable() && sent < count) {
      sender.send({ body: rhea.message.data_section(body(sent)), message_id: sent });
      sent++;
    }
    if (settled && sent >= count) done();
  });
  container.on('accepted', () => { if (++accepted + rejected + released >= count) done(); });
  container.on('rejected', () => { if (accepted + ++rejected + released >= count) done(); });
  container.on('released', () => { if (accepted + rejected + ++released >= count) done(); });
  container.on('connection_close', () => process.exit(0));
  container.on('disconnected', (ctx) => { report({ error: String(ctx.error || 'disconnected'), sent, accepted }); process.exit(1); });
}

function receive() {
  const container = rhea.create_container();
  const conn = container.connect(connectOptions());
  const credit = Math.min(Number(opt.credit || 500), count);
  // a fixed window: no more than `count` deliveries are ever asked for
  const r = conn.open_receiver({ source: { address: opt.address }, credit_window: 0 });
  r.add_credit(credit);
  container.on('settled', () => {});
  let granted = credit;
  container.on('accepted', () => {});
  container.on('message', () => { if (granted < count) { r.add_credit(1); granted++; } });
  let received = 0, octets = 0, t0 = 0;
  const heads = [];  // the first 10 octets of each body (up to 100 messages)
  container.on('message', (ctx) => {
    if (!t0) t0 = Date.now();
    if (received >= count) return;  // beyond what was asked: not settled, given back
    let b = ctx.message.body;
    if (b && b.content) b = b.content;
    octets += b ? b.length || 0 : 0;
    if (count <= 100) heads.push(Buffer.from(b || '').subarray(0, 10).toString('latin1'));
    if (++received >= count) {
      report({ received, octets, seconds: (Date.now() - t0) / 1000, heads });
      conn.close();
    }
  });
  container.on('connection_close', () => process.exit(0));
  container.on('disconnected', (ctx) => { report({ error: String(ctx.error || 'disconnected'), received }); process.exit(1); });
}

function request() {
  // a dynamic (temporary) node: its generated address is usable as a target
  const container = rhea.create_container();
  const conn = container.connect(connectOptions());
  const replies = conn.open_receiver({ source: { dynamic: true } });
  let sender = null, sent = 0, answered = 0, to = null;
  const go = () => { while (sender && sender.sendable() && sent < count) sender.send({ reply_to: to, body: 'req-' + sent++ }); };
  container.on('receiver_open', (ctx) => {
    to = ctx.receiver.source.address;
    sender = conn.open_sender(to);
  });
  container.on('sendable', go);
  container.on('message', (ctx) => {
    if (ctx.receiver !== replies) return;
    if (++answered >= count) { report({ sent, answered, last: String(ctx.message.body), reply_to: to }); conn.close(); }
  });
  container.on('connection_close', () => process.exit(0));
  container.on('error', (e) => { report({ error: String(e) }); process.exit(1); });
  container.on('disconnected', (ctx) => { report({ error: String(ctx.error || 'disconnected') }); process.exit(1); });
}

function durable() {
  // A durable subscription (source durable unsettled-state, expiry never)
  // under a fixed container id and link name: take K messages (accepting
  // all but the last H), then detach without closing; with --publish,
  // publish M durable messages "p<i>" to the address meanwhile; with
  // --resume, attach the same link name again and take N (accepting
  // them).  --end closes the link at the end (the subscription goes);
  // otherwise it is detached (it stays).
  const container = rhea.create_container({ id: opt.container });
  const conn = container.connect(Object.assign(connectOptions(), { container_id: opt.container }));
  const take = Number(opt.take || 0), hold = Number(opt.hold || 0);
  const publish = Number(opt.publish || 0), resume = Number(opt.resume || 0);
  const out = { attachments: [] };
  const source = { address: opt.address, durable: 2, expiry_policy: 'never' };
  const plain = (t) => t ? { address: t.address, durable: t.durable,
    expiry_policy: t.expiry_policy, timeout: t.timeout } : null;
  const finish = () => { report(out); conn.close(); };
  let step = null;
  function attach(n, last) {
    const got = { source: null, messages: [] };
    out.attachments.push(got);
    const r = conn.open_receiver({ name: opt.name, source, credit_window: 0, autoaccept: false });
    step = { r, n, last, got };
    if (n) r.add_credit(n);
  }
  function leave(s) {
    if (s.last && opt.end) s.r.close(); else s.r.detach();
  }
  container.on('receiver_open', (ctx) => {
    if (ctx.receiver !== step.r) return;
    step.got.source = plain(ctx.receiver.source);
    if (!step.n) leave(step);
  });
  container.on('message', (ctx) => {
    const s = step;
    if (ctx.receiver !== s.r) return;
    let b = ctx.message.body;
    if (b && b.content) b = b.content;
    s.got.messages.push({ body: Buffer.from(b || '').toString('latin1'),
      delivery_count: ctx.message.delivery_count || 0,
      first_acquirer: Boolean(ctx.message.first_acquirer) });
    const i = s.got.messages.length;
    if (s.last || i <= s.n - hold) ctx.delivery.accept();
    if (i === s.n) leave(s);
  });
  container.on('receiver_close', (ctx) => {
    const s = step;
    if (ctx.receiver !== s.r) return;
    out.attachments[out.attachments.length - 1].detach_error =
      ctx.receiver.error ? String(ctx.receiver.error.condition) : null;
    if (s.last) { finish(); return; }
    if (!publish) { attach(resume, true); return; }
    const snd = conn.open_sender(opt.address);
    let sent = 0, accepted = 0;
    snd.on('sendable', () => {
      while (snd.sendable() && sent < publish) {
        snd.send({ durable: true, body: rhea.message.data_section(Buffer.from('p' + sent++)) });
      }
    });
    snd.on('accepted', () => {
      if (++accepted < publish) return;
      out.published = accepted;
      snd.close();
      if (resume) attach(resume, true); else finish();
    });
  });
  container.on('connection_close', () => process.exit(0));
  container.on('error', (e) => { report(Object.assign(out, { error: String(e) })); process.exit(1); });
  container.on('disconnected', (ctx) => { report(Object.assign(out, { error: String(ctx.error || 'disconnected') })); process.exit(1); });
  attach(take, !publish && !resume);
}

const modes = { server, send, receive, request, durable };
if (!modes[mode]) { process.stderr.write('usage: server|send|receive|request|durable\n'); process.exit(2); }
modes[mode]();
