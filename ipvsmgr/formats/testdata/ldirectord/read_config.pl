#!/usr/bin/perl
# Loads a configuration with ldirectord's own read_config, without starting
# the daemon, and prints what it loaded: one "V" line per virtual service,
# one "R" line per real server, or "ERROR line message".
# Usage: read_config.pl /usr/sbin/ldirectord FILE
use strict;
use warnings;

my ($ldirectord, $file) = @ARGV;
open(my $fh, "<", $ldirectord) or die "open $ldirectord: $!";
my $src = do { local $/; <$fh> };
close($fh);
# Everything but the main code: the declarations, the defaults and the subs.
$src =~ s/\n# main code\n.*?\n# functions\n/\n/s or die "no main code in $ldirectord";
$src =~ s/\n__END__\n.*//s;
@ARGV = ();
{
	no strict; no warnings;
	eval "package main; $src; 1" or die "load $ldirectord: $@";
}
no warnings qw(redefine once);
*main::config_error = sub {
	my ($line, $msg) = @_;
	chomp($msg);
	print "ERROR $line $msg\n";
	exit 0;
};
*main::config_warn = sub { my ($line, $msg) = @_; chomp($msg); print "WARN $line $msg\n"; };
*main::ld_openlog = sub { return 0; };
$main::CONFIG = $file;
main::read_config();
for my $v (@main::VIRTUAL) {
	my $id = defined $v->{fwm} ? "fwm:$v->{fwm}" : "$v->{protocol}:$v->{server}:$v->{port}";
	my $fb = $v->{fallback} ? "$v->{fallback}{server}:" . ($v->{fallback}{port} // "") . " $v->{fallback}{forward}" : "-";
	printf "V %s %s %s %s %s\n", $id, $v->{scheduler}, $v->{persistent} // "-", $v->{checktype}, $fb;
	for my $r (@{$v->{real}}) {
		printf "R %s:%s %s %s\n", $r->{server}, $r->{port}, $r->{forward}, $r->{weight};
	}
}
