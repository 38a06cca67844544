/**
 * The bridge's forwarder in Perl, which starts in ~2 ms where Node takes 30-60 ms (and 100+ under
 * load): issue 33 measured that Node start-up was most of a proxy-only sample's start-up. Perl is in
 * perl-base, which Debian and Ubuntu mark essential (and git's own scripts need it); where it is
 * missing or its probe fails, bridge.ts falls back to the Node forwarder.
 *
 * Run as `perl -T -e PERL_BRIDGE_SOURCE -- PORT SOCKET FILE ARGS…` inside the sandbox's network
 * namespace, as the process bwrap starts:
 *
 * 1. It listens on 127.0.0.1:PORT (or exits 125 saying why). From here on a connection to the port
 *    waits in the kernel's backlog, so the command may connect the moment it starts.
 * 2. It forks the forwarder twice over, so the forwarder is the namespace's init's child (bwrap's
 *    pid 1), not the command's: a command that waits for or counts its children never meets it.
 *    The forwarder leaves the process group (Ctrl-C and Ctrl-Z at a terminal, `kill 0` reach the
 *    command only), ignores the terminal's signals and holds none of the command's stdio, so the
 *    command's output ends when the command does.
 * 3. It then becomes the command (exec; 127 and why if it cannot), keeping the pid bwrap waits for:
 *    the sandbox ends with the command's own exit status (a signal as 128 + its number), and when
 *    the namespace's pid 1 goes, the kernel kills the forwarder with everything else in it.
 *
 * The forwarder accepts each connection and forks a relay that copies bytes both ways between it and
 * the proxy's Unix socket as they come (select, no buffering beyond one read: SSE streams on), and
 * passes a half-close on. It reaches nothing but that socket, as the Node forwarder did.
 *
 * No module is loaded, not even strict or Socket (Socket pulls in Carp, Exporter and warnings: 12 ms
 * of a loaded machine's start-up), so the socket calls name Linux's numbers: AF_INET 2, AF_UNIX 1,
 * SOCK_STREAM 1, and struct sockaddr_in / sockaddr_un packed by hand. findForwarder checks them on
 * this machine before choosing Perl.
 *
 * -T (taint mode) makes Perl ignore PERL5LIB and PERL5OPT from the command's environment, which
 * belong to the command (a user's local::lib, say) and could point at modules the sandbox does not
 * show; the argv and environment are then passed on unchanged (untainted as they are).
 */
/** What findForwarder runs once: the socket calls above work here (an ephemeral port, no relay). */
export const PERL_PROBE_SOURCE = "socket(L, 2, 1, 0) && bind(L, pack('S n C4 x8', 2, 0, 127, 0, 0, 1)) && listen(L, 1) && socket(U, 1, 1, 0) or exit 1; exit 0";

export const PERL_BRIDGE_SOURCE = String.raw`
my ($port, $path, @cmd) = map { /\A(.*)\z/s } @ARGV;
$ENV{$_} = $ENV{$_} =~ /\A(.*)\z/s ? $1 : '' for keys %ENV;
my $l;
socket($l, 2, 1, 0) && bind($l, pack('S n C4 x8', 2, $port, 127, 0, 0, 1)) && listen($l, 4096)
  or do { print STDERR "polar sandbox bridge: cannot listen on 127.0.0.1:$port: $!\n"; exit 125 };
my $child = fork;
defined $child or do { print STDERR "polar sandbox bridge: cannot start the forwarder: $!\n"; exit 125 };
if ($child) {
  waitpid($child, 0);
  close $l;
  { exec { $cmd[0] } @cmd }
  print STDERR "polar sandbox: cannot start $cmd[0]: $!\n";
  exit 127;
}
fork and exit 0;
setpgrp(0, 0);
$SIG{$_} = 'IGNORE' for qw(INT QUIT HUP TSTP TTIN TTOU PIPE CHLD);
open STDIN, '<', '/dev/null';
open STDOUT, '>', '/dev/null';
open STDERR, '>', '/dev/null';
while (1) {
  accept(my $c, $l) or do { select(undef, undef, undef, 0.1); next };
  my $k = fork;
  if (!$k) { relay($c) if defined $k; exit 0 }
  close $c;
}
sub relay {
  my ($c) = @_;
  close $l;
  my $u;
  socket($u, 1, 1, 0) && connect($u, pack('S a* x', 1, $path)) or return;
  my @fh = ($c, $u);
  my @open = (1, 1);
  while ($open[0] || $open[1]) {
    my $rin = '';
    vec($rin, fileno $fh[$_], 1) = 1 for grep { $open[$_] } 0, 1;
    select(my $rout = $rin, undef, undef, undef) > 0 or next;
    for my $i (0, 1) {
      next unless $open[$i] && vec($rout, fileno $fh[$i], 1);
      my $n = sysread $fh[$i], my $buf, 65536;
      return unless defined $n;
      if ($n == 0) { $open[$i] = 0; shutdown $fh[1 - $i], 1; next }
      for (my $o = 0; $o < $n;) { my $w = syswrite $fh[1 - $i], $buf, $n - $o, $o; return unless defined $w; $o += $w }
    }
  }
}
`;
