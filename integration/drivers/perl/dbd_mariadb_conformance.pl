#!/usr/bin/perl
# DBD::MariaDB (Debian's libdbd-mariadb-perl, over libmariadb) through
# shardgate, with server-side prepared statements (mariadb_server_prepare=1),
# which bind every parameter as a string:
#
#   perl integration/drivers/perl/dbd_mariadb_conformance.pl --port 6033 \
#       [--host 127.0.0.1 --master-a 3307 --master-b 3308 --mod-host 3310]
#
# Checks that IDs bound as strings route as integers (`id IN (?, ?)` over
# two shards, `= ?` on UPDATE, a mapping key on INSERT), with the rows read
# back on the masters, and that LOAD DATA LOCAL INFILE loads the client's
# file into an explicit shard. Exits 0 when every check passed.
use strict;
use warnings;

use DBI;
use File::Temp qw(tempfile);
use Getopt::Long;

my ($host, $port, $master_a, $master_b, $mod_host) = ('127.0.0.1', undef, 3307, 3308, 3310);
GetOptions(
    'host=s'     => \$host,
    'port=i'     => \$port,
    'master-a=i' => \$master_a,
    'master-b=i' => \$master_b,
    'mod-host=i' => \$mod_host,
) or die "bad arguments\n";
die "--port (the proxy's port) is required\n" unless $port;

my $failures = 0;

sub check {
    my ($ok, $what) = @_;
    print(($ok ? 'ok   ' : 'FAIL ') . "$what\n");
    $failures++ unless $ok;
}

sub connect_to {
    my ($to, $user, $password, %extra) = @_;
    return DBI->connect("DBI:MariaDB:host=$host;port=$to", $user, $password,
        { RaiseError => 1, PrintError => 0, AutoCommit => 1, %extra });
}

sub pin_id {
    my ($shard, $local) = @_;
    return ($shard << 46) | (1 << 36) | $local;
}

sub local_id { return $_[0] & ((1 << 36) - 1) }

# One value read straight from a master as the data account.
sub on_master {
    my ($master, $sql, @bind) = @_;
    my $direct = connect_to($master, 'shard', 'shardpw');
    my ($value) = $direct->selectrow_array($sql, undef, @bind);
    $direct->disconnect;
    return $value;
}

my $proxy = connect_to($port, 'app', 'app',
    mariadb_server_prepare => 1, mariadb_local_infile => 1);
my $tag = "perl$$";

# Two pins, on shard 3429 (master B) and shard 5 (master A).
my %id;
for my $shard (3429, 5) {
    $proxy->do("INSERT /*+ SHARD($shard) */ INTO pins (data) VALUES (?)", undef, "$tag-$shard");
    $id{$shard} = $proxy->{mariadb_insertid};
    check(($id{$shard} >> 46) == $shard, "INSERT with a SHARD hint composes an ID on shard $shard");
}

# IN (?, ?) over two shards, the IDs bound as strings.
my $rows = $proxy->selectall_arrayref(
    'SELECT id, data FROM pins WHERE id IN (?, ?) ORDER BY data', undef, "$id{3429}", "$id{5}");
check(
    @$rows == 2
        && $rows->[0][0] eq $id{3429} && $rows->[0][1] eq "$tag-3429"
        && $rows->[1][0] eq $id{5} && $rows->[1][1] eq "$tag-5",
    'IN (?, ?) with string-bound IDs reads both shards'
);

# `= ?` on an UPDATE, the ID bound as a string: the row changes on its master.
for my $shard (3429, 5) {
    my $changed = $proxy->do('UPDATE pins SET data = ? WHERE id = ?', undef, "$tag-$shard-updated", "$id{$shard}");
    my $master = $shard >= 2048 ? $master_b : $master_a;
    my $stored = on_master($master, sprintf('SELECT data FROM db%05d.pins WHERE local_id = ?', $shard),
        local_id($id{$shard}));
    check($changed == 1 && defined $stored && $stored eq "$tag-$shard-updated",
        "UPDATE ... WHERE id = ? (a string) changes the row on shard ${shard}'s master");
}

# A string that is not a decimal ID is refused, not guessed.
my $refused = eval {
    $proxy->do('UPDATE pins SET data = ? WHERE id = ?', undef, 'hostile', " $id{3429}");
    0;
} // 1;
check($refused && $DBI::err == 1105, "an ID bound with a leading blank is refused (got " . ($DBI::err // 'none') . ")");

# A mapping table's from-ID bound as a string routes the INSERT.
my $board = (3000 << 46) | (2 << 36) | 4242;
$proxy->do('REPLACE INTO board_has_pins (board_id, pin_id, sequence) VALUES (?, ?, ?)',
    undef, "$board", "$id{3429}", '1');
# (Earlier runs leave rows of the same board: look for this run's pin.)
my $mapped = on_master($master_b, 'SELECT pin_id FROM db03000.board_has_pins WHERE board_id = ? AND pin_id = ?',
    "$board", "$id{3429}");
check(defined $mapped && $mapped eq $id{3429}, 'INSERT with a string-bound mapping key lands on its shard');

# LOAD DATA LOCAL INFILE (not prepared: the server does not prepare it).
my ($fh, $file) = tempfile("shardgate-$tag-XXXX", TMPDIR => 1, SUFFIX => '.txt', UNLINK => 1);
print $fh map { "$tag-load-$_\n" } 1 .. 100;
close $fh;
my $loaded = $proxy->do("LOAD DATA LOCAL INFILE '$file' INTO TABLE db03429.pins (data)",
    { mariadb_server_prepare => 0 });
my $count = on_master($master_b, "SELECT COUNT(*) FROM db03429.pins WHERE data LIKE '$tag-load-%'");
check($loaded == 100 && $count == 100, "LOAD DATA LOCAL INFILE loads 100 rows on shard 3429's master (got $count)");

$proxy->disconnect;
print $failures ? "$failures check(s) failed\n" : "all checks passed\n";
exit($failures ? 1 : 0);
