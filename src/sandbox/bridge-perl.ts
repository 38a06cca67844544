/**
 * The bridge's forwarder in Perl, which starts in ~2 ms where Node takes 30-60 ms (and 100+ under
 * load): issue 33 measured that Node start-up was most of a proxy-only sample's start-up. Perl is in
 * perl-base, which Debian and Ubuntu mark essential (and git's own scripts need it); where it is
 * missing or its probe fails, bridge.ts falls back to the Node forwarder.
 *
 * Run as `perl -e PERL_BRIDGE_SOURCE -- PORT SOCKET QUIET FILE ARGS…` (bridge.ts bridgeCommand)
 * inside the sandbox's network namespace, as the process bwrap starts:
 *
 * 1. It listens on 127.0.0.1:PORT (or exits 125 saying why). From here on a connection to the port
 *    waits in the kernel's backlog, so the command may connect the moment it starts.
 * 2. It forks the forwarder twice over, so the forwarder is the namespace's init's child (bwrap's
 *    pid 1), not the command's: a command that waits for or counts its children never meets it.
 *    The forwarder leaves the process group (Ctrl-C and Ctrl-Z at a terminal, `kill 0` reach the
 *    command only), ignores the terminal's signals and holds none of the command's stdio, so the
 *    command's output ends when the command does. The middle process leaves the group and ignores
 *    the signals before it forks the forwarder and exits, so the forwarder has both from its first
 *    instruction: the command starts only after the middle process is gone, and a `kill 0` at once
 *    can no longer land before the forwarder has done it (bridge.test.ts, 'stays up …', failed
 *    about once in a suite run that way).
 * 3. It then becomes the command (exec; 127 and why if it cannot), with SIGINT and SIGQUIT as a
 *    command gets them (an interactive sandbox's bwrap starts with them ignored: jail.ts), keeping the pid bwrap waits for:
 *    the sandbox ends with the command's own exit status (a signal as 128 + its number), and when
 *    the namespace's pid 1 goes, the kernel kills the forwarder with everything else in it.
 *
 * The forwarder accepts each connection and forks a relay for it: two processes, one per direction,
 * each copying bytes as they come (no buffering beyond one read: SSE streams on) with blocking
 * reads and writes, so a peer that does not read while it writes holds up only its own direction
 * (one loop over both directions would stop reading the client while its reply could not be
 * written, and a client that sends its whole body before reading would then wait forever). An end
 * of input is passed on as a half-close; an error closes the connection both ways, which ends the
 * other direction too. It reaches nothing but the proxy's socket, as the Node forwarder did.
 *
 * No module is loaded, not even strict or Socket (Socket pulls in Carp, Exporter and warnings: 12 ms
 * of a loaded machine's start-up), so the socket calls name Linux's numbers: AF_INET 2, AF_UNIX 1,
 * SOCK_STREAM 1, and struct sockaddr_in / sockaddr_un packed by hand. findForwarder checks them on
 * this machine before choosing Perl.
 *
 * It runs with the command's environment, as the Node forwarder does. Without modules, Perl reads
 * nothing of it but PERL5OPT (switches, -M among them, applied before the script): a command whose
 * environment sets it gets the Node forwarder (bridge.ts). Not taint mode (-T), which would ignore
 * PERL5OPT: it refuses to exec at all when PATH holds `.` or a world-writable folder.
 */
/** What findForwarder runs once: the socket calls above work here (an ephemeral port, no relay). */
export const PERL_PROBE_SOURCE = "socket(L, 2, 1, 0) && bind(L, pack('S n C4 x8', 2, 0, 127, 0, 0, 1)) && listen(L, 1) && socket(U, 1, 1, 0) or exit 1; exit 0";

/**
 * `perl -e PERL_EXEC_SOURCE -- QUIET FILE ARGS…`: FILE with SIGINT and SIGQUIT back to their
 * default, where an interactive sandbox without the bridge starts its command (jail.ts); 127 and why
 * if it cannot start it, as the bridge says.
 */
export const PERL_EXEC_SOURCE = String.raw`
my ($quiet, @cmd) = @ARGV;
delete $ENV{PERL_BADLANG} if $quiet;
$SIG{INT} = $SIG{QUIT} = 'DEFAULT';
{ exec { $cmd[0] } @cmd }
print STDERR "polar sandbox: cannot start $cmd[0]: $!\n";
exit 127;
`;

export const PERL_BRIDGE_SOURCE = String.raw`
my ($port, $path, $quiet, @cmd) = @ARGV;
delete $ENV{PERL_BADLANG} if $quiet;
my $l;
socket($l, 2, 1, 0) && bind($l, pack('S n C4 x8', 2, $port, 127, 0, 0, 1)) && listen($l, 4096)
  or do { print STDERR "polar sandbox bridge: cannot listen on 127.0.0.1:$port: $!\n"; exit 125 };
my $child = fork;
defined $child or do { print STDERR "polar sandbox bridge: cannot start the forwarder: $!\n"; exit 125 };
if ($child) {
  waitpid($child, 0);
  close $l;
  $SIG{INT} = $SIG{QUIT} = 'DEFAULT';
  { exec { $cmd[0] } @cmd }
  print STDERR "polar sandbox: cannot start $cmd[0]: $!\n";
  exit 127;
}
setpgrp(0, 0);
$SIG{$_} = 'IGNORE' for qw(INT QUIT HUP TSTP TTIN TTOU PIPE CHLD);
fork and exit 0;
open STDIN, '<', '/dev/null';
open STDOUT, '>', '/dev/null';
open STDERR, '>', '/dev/null';
while (1) {
  accept(my $c, $l) or do { select(undef, undef, undef, 0.1); next };
  my $k = fork;
  if (!defined $k) { close $c; next }
  if (!$k) { relay($c); exit 0 }
  close $c;
}
sub relay {
  my ($c) = @_;
  close $l;
  my $u;
  socket($u, 1, 1, 0) && connect($u, pack('S a* x', 1, $path)) or return;
  my $k = fork;
  return unless defined $k;
  my ($from, $to) = $k ? ($c, $u) : ($u, $c);
  while (1) {
    my $n = sysread $from, my $buf, 65536;
    if (!defined $n) { shutdown $from, 2; shutdown $to, 2; return }
    if ($n == 0) { shutdown $to, 1; return }
    for (my $o = 0; $o < $n;) {
      my $w = syswrite $to, $buf, $n - $o, $o;
      if (!defined $w) { shutdown $from, 2; shutdown $to, 2; return }
      $o += $w;
    }
  }
}
`;
