// rhea (npm) as a 1.0 client to be fuzzed (amqp-sansio fuzz --protocol 1.0
// --role server): SASL PLAIN as guest, one message sent to fz-q, received
// back and accepted, then close.  Errors are handled (logged to stderr) so
// that what goes on the wire is rhea's own reaction, not this script dying
// on an unhandled 'error' event.  Exit status 0: the work was done.
//
//   node rhea_fuzz_client_1_0.js PORT
'use strict';
const rhea = require('rhea');

const port = Number(process.argv[2]);
const container = rhea.create_container({ id: 'rhea-fuzz-client' });
let done = false;
const quit = (status) => setTimeout(() => process.exit(status), 200);

container.on('error', (e) => { process.stderr.write(`error: ${e}\n`); });
container.on('connection_error', (ctx) => {
  process.stderr.write(`connection_error: ${JSON.stringify(ctx.connection.error)}\n`);
});
container.on('session_error', (ctx) => {
  process.stderr.write(`session_error: ${JSON.stringify(ctx.session.error)}\n`);
});
container.on('sender_error', (ctx) => {
  process.stderr.write(`sender_error: ${JSON.stringify(ctx.sender.error)}\n`);
});
container.on('receiver_error', (ctx) => {
  process.stderr.write(`receiver_error: ${JSON.stringify(ctx.receiver.error)}\n`);
});
container.on('disconnected', (ctx) => {
  if (ctx.error) process.stderr.write(`disconnected: ${ctx.error}\n`);
  quit(done ? 0 : 1);
});
container.on('connection_close', () => quit(done ? 0 : 1));
container.on('accepted', (ctx) => {
  ctx.connection.open_receiver('fz-q');
});
container.on('message', (ctx) => {
  ctx.delivery.accept();
  done = true;
  ctx.connection.close();
});
const conn = container.connect({ host: '127.0.0.1', port, reconnect: false,
  username: 'guest', password: 'guest', container_id: 'rhea-fuzz-client' });
conn.open_sender('fz-q').on('sendable', (ctx) => {
  if (!ctx.sender.sent) { ctx.sender.sent = true; ctx.sender.send({ body: 'fz' }); }
});
