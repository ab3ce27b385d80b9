import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * MariaDB Connector/J through shardgate, with server-side prepared statements
 * (useServerPrepStmts=true: COM_STMT_PREPARE/EXECUTE) and client-side ones
 * (parameters interpolated into text queries). Every check connects through
 * the proxy as app/app, then straight to the backend hosts as shard/shardpw
 * to see where the rows landed. Prints ok/FAIL per check and exits 1 if any
 * failed.
 *
 * <pre>
 * java -cp mariadb-java-client.jar:DIR ConnectorJConformance --port 6033
 *     [--host 127.0.0.1] [--master-a 3307] [--master-b 3308] [--mod-host 3310] [--seed N]
 *     [--url-options 'name=value&amp;...']   (more connection options, for experiments)
 * </pre>
 */
public final class ConnectorJConformance {
    static final int TYPE_PIN = 1;
    static final int ERR_SINGLE_SHARD = 1105;
    static final String UTF8_SAMPLE =
        "Grüße, “quotes” 'single' \"double\" back\\slash — 中文 日本語 𝄞 🙂👍🏽👩‍💻 ñ";

    String host = "127.0.0.1";
    int port;
    String backendHost = "127.0.0.1";
    int masterA = 3307;
    int masterB = 3308;
    Random rng;
    boolean serverPrep;
    String extraUrlOptions = "";

    interface Check {
        void run() throws Exception;
    }

    static final class CheckFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        CheckFailed(String what) {
            super(what);
        }
    }

    static void expect(boolean cond, String what) {
        if (!cond) {
            throw new CheckFailed(what);
        }
    }

    static void expectEq(Object got, Object want, String what) {
        if (got == null ? want != null : !got.equals(want)) {
            throw new CheckFailed(what + ": got " + got + ", want " + want);
        }
    }

    // ------------------------------------------------------------ IDs and hosts

    static long shardOf(long id) {
        return (id >>> 46) & 0xFFFF;
    }

    static long typeOf(long id) {
        return (id >>> 36) & 0x3FF;
    }

    static long localOf(long id) {
        return id & ((1L << 36) - 1);
    }

    static String shardDb(long shard) {
        return String.format("db%05d", shard);
    }

    int masterOf(long shard) {
        return shard < 2048 ? masterA : masterB;
    }

    int shardOnA() {
        return rng.nextInt(2048);
    }

    int shardOnB() {
        return 2048 + rng.nextInt(2048);
    }

    String marker(String what) {
        return "{\"driver_test\":\"connectorj-" + what + "\",\"r\":" + rng.nextInt(1 << 30) + "}";
    }

    Connection proxy(String database) throws SQLException {
        String url = "jdbc:mariadb://" + host + ":" + port + "/" + (database == null ? "" : database)
            + "?user=app&password=app&connectTimeout=10000&socketTimeout=60000"
            + "&useServerPrepStmts=" + serverPrep + extraUrlOptions;
        return DriverManager.getConnection(url);
    }

    Connection direct(int hostPort) throws SQLException {
        return DriverManager.getConnection("jdbc:mariadb://" + backendHost + ":" + hostPort
            + "/?user=shard&password=shardpw&connectTimeout=10000");
    }

    /** `data` of pins row `id` read on the master that owns its shard, or null. */
    String storedData(long id) throws SQLException {
        long shard = shardOf(id);
        try (Connection d = direct(masterOf(shard));
             PreparedStatement ps = d.prepareStatement(
                 "SELECT data FROM " + shardDb(shard) + ".pins WHERE local_id = ?")) {
            ps.setLong(1, localOf(id));
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
    }

    void expectPin(long id, long shard, String what) {
        expectEq(id >>> 62, 0L, what + ": reserved bits of " + id);
        expectEq(shardOf(id), shard, what + ": shard of " + id);
        expectEq(typeOf(id), (long) TYPE_PIN, what + ": type of " + id);
        expect(localOf(id) > 0, what + ": local id of " + id + " is 0");
    }

    // INSERT /*+ SHARD(n) */ with getGeneratedKeys(), which must be the 64-bit ID.
    long insert(Connection c, long shard, String data) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                 "INSERT /*+ SHARD(" + shard + ") */ INTO pins (data) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
            ps.setString(1, data);
            expectEq(ps.executeUpdate(), 1, "rows inserted into shard " + shard);
            try (ResultSet keys = ps.getGeneratedKeys()) {
                expect(keys.next(), "getGeneratedKeys() of an INSERT into shard " + shard + " is empty");
                long id = keys.getLong(1);
                expectPin(id, shard, "generated key of INSERT /*+ SHARD(" + shard + ") */");
                return id;
            }
        }
    }

    List<String> strings(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setObject(i + 1, params[i]);
            }
            List<String> out = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out.add(rs.getString(1));
                }
            }
            return out;
        }
    }

    String one(Connection c, String sql, Object... params) throws SQLException {
        List<String> rows = strings(c, sql, params);
        expectEq(rows.size(), 1, "row count of " + sql);
        return rows.get(0);
    }

    int expectError(Connection c, String sql, long param, int code, String what) {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setLong(1, param);
            ps.execute();
        } catch (SQLException e) {
            expectEq(e.getErrorCode(), code, what + ": error code (message " + e.getMessage() + ")");
            expect(e.getMessage().contains("shardgate:"), what + ": message " + e.getMessage());
            return e.getErrorCode();
        }
        throw new CheckFailed(what + ": expected error " + code + ", the statement succeeded");
    }

    // ------------------------------------------------------------ checks

    void checkConnect() throws Exception {
        try (Connection c = proxy("db00001")) {
            expectEq(one(c, "SELECT DATABASE()"), "db00001", "DATABASE() after connecting with db00001");
            expectEq(one(c, "SELECT 1"), "1", "SELECT 1");
        }
        try (Connection c = proxy(null)) {
            expectEq(one(c, "SELECT DATABASE()"), null, "DATABASE() after connecting without a database");
            expectEq(one(c, "SELECT @@character_set_client"), "utf8mb4", "character_set_client");
        }
    }

    void checkInsertByHintAndReadBack() throws Exception {
        try (Connection c = proxy(null)) {
            for (int shard : new int[] {shardOnA(), shardOnB()}) {
                String data = marker("hint-" + shard);
                long id = insert(c, shard, data);
                expectEq(one(c, "SELECT LAST_INSERT_ID()"), Long.toString(id), "LAST_INSERT_ID()");
                expectEq(one(c, "SELECT data FROM pins WHERE id = ?", id), data, "read back by id " + id);
                expectEq(storedData(id), data, "row " + id + " on host " + masterOf(shard));
            }
        }
    }

    void checkIdsBoundAsParameters() throws Exception {
        try (Connection c = proxy(null)) {
            int a = shardOnA();
            int b = shardOnB();
            long onA = insert(c, a, marker("param-a"));
            long onB = insert(c, b, marker("param-b"));
            expectEq(one(c, "SELECT id FROM pins WHERE id = ?", onA), Long.toString(onA), "id bound as a long");
            expectEq(one(c, "SELECT id FROM pins WHERE id = ?", Long.toString(onB)), Long.toString(onB),
                "id bound as a decimal string");
            List<String> got = strings(c, "SELECT id FROM pins WHERE id IN (?, ?) ORDER BY id", onA, onB);
            List<String> want = List.of(Long.toString(Math.min(onA, onB)), Long.toString(Math.max(onA, onB)));
            expectEq(got, want, "id IN (?, ?) over shards " + a + " and " + b + " (two hosts)");
            try (PreparedStatement ps = c.prepareStatement("UPDATE pins SET data = ? WHERE id = ?")) {
                ps.setString(1, "param-updated");
                ps.setLong(2, onB);
                expectEq(ps.executeUpdate(), 1, "UPDATE ... WHERE id = <bound id>");
            }
            expectEq(storedData(onB), "param-updated", "updated row " + onB + " on its host");
        }
    }

    void checkForUpdateReadModifyWrite() throws Exception {
        long id;
        try (Connection c = proxy(null)) {
            id = insert(c, shardOnB(), "{\"n\":0}");
        }
        try (Connection c = proxy(null)) {
            c.setAutoCommit(false);
            for (int i = 0; i < 3; i++) {
                expectEq(one(c, "SELECT data FROM pins WHERE id = ? FOR UPDATE", id), "{\"n\":" + i + "}",
                    "value read FOR UPDATE in round " + i);
                try (PreparedStatement ps = c.prepareStatement("UPDATE pins SET data = ? WHERE id = ?")) {
                    ps.setString(1, "{\"n\":" + (i + 1) + "}");
                    ps.setLong(2, id);
                    expectEq(ps.executeUpdate(), 1, "UPDATE after SELECT ... FOR UPDATE");
                }
                expectEq(storedData(id), "{\"n\":" + i + "}", "the host's value before commit() in round " + i);
                c.commit();
            }
        }
        expectEq(storedData(id), "{\"n\":3}", "value on the host after three read-modify-write transactions");
    }

    void checkCrossShardErrorInTransaction() throws Exception {
        int a = shardOnA();
        int b = shardOnB();
        long onB;
        try (Connection c = proxy(null)) {
            onB = insert(c, b, marker("cross-b"));
        }
        try (Connection c = proxy(null)) {
            c.setAutoCommit(false);
            long first = insert(c, a, marker("cross-first"));
            expectError(c, "UPDATE pins SET data = 'x' WHERE id = ?", onB, ERR_SINGLE_SHARD,
                "an UPDATE of shard " + b + " inside a transaction bound to shard " + a);
            expectEq(strings(c, "SELECT id FROM pins WHERE id = ?", first).size(), 1,
                "the transaction still sees its own write after the refused statement");
            c.rollback();
            expectEq(storedData(first), null, "the bound write is gone after rollback()");
            String data = marker("after-rollback");
            long id = insert(c, b, data);
            c.commit();
            expectEq(storedData(id), data, "a write committed after the rollback lands on its host");
        }
    }

    void checkUtf8WithEmoji() throws Exception {
        try (Connection c = proxy(null)) {
            int shard = shardOnA();
            long id = insert(c, shard, UTF8_SAMPLE);
            expectEq(one(c, "SELECT data FROM pins WHERE id = ?", id), UTF8_SAMPLE, "UTF-8 text read back");
            expectEq(storedData(id), UTF8_SAMPLE, "UTF-8 text on the host");
            StringBuilder hex = new StringBuilder();
            for (byte x : UTF8_SAMPLE.getBytes(StandardCharsets.UTF_8)) {
                hex.append(String.format("%02X", x));
            }
            expectEq(one(c, "SELECT HEX(data) FROM pins WHERE id = ?", id), hex.toString(), "stored bytes (HEX)");
        }
    }

    void checkCommitRollbackAutocommit() throws Exception {
        try (Connection c = proxy(null)) {
            c.setAutoCommit(false);
            String data = marker("committed");
            long committed = insert(c, shardOnA(), data);
            expectEq(storedData(committed), null, "an uncommitted row seen on the host by another session");
            c.commit();
            expectEq(storedData(committed), data, "a committed row on its host");
            long rolledBack = insert(c, shardOnB(), marker("rolled-back"));
            c.rollback();
            expectEq(storedData(rolledBack), null, "a rolled back row on its host");
            long second = insert(c, shardOnB(), marker("committed-2"));
            c.commit();
            expect(storedData(second) != null, "a second committed transaction's row on its host");
            // Connector/J sends SET autocommit=1 only if the server's status
            // flags say autocommit is off.
            c.setAutoCommit(true);
            for (int shard : new int[] {shardOnA(), shardOnB()}) {
                String auto = marker("autocommit-" + shard);
                long id = insert(c, shard, auto);
                expectEq(storedData(id), auto, "a write after setAutoCommit(true) is committed at once (shard "
                    + shard + ")");
            }
            expectEq(one(c, "SELECT @@autocommit"), "1", "@@autocommit after setAutoCommit(true)");
        }
    }

    // ------------------------------------------------------------ runner

    public static void main(String[] args) throws Exception {
        ConnectorJConformance t = new ConnectorJConformance();
        long seed = new Random().nextInt(Integer.MAX_VALUE);
        for (int i = 0; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : "";
            switch (args[i]) {
                case "--host": t.host = v; i++; break;
                case "--port": t.port = Integer.parseInt(v); i++; break;
                case "--backend-host": t.backendHost = v; i++; break;
                case "--master-a": t.masterA = Integer.parseInt(v); i++; break;
                case "--master-b": t.masterB = Integer.parseInt(v); i++; break;
                case "--mod-host": i++; break;
                case "--seed": seed = Long.parseLong(v); i++; break;
                case "--url-options": t.extraUrlOptions = "&" + v; i++; break;
                default:
                    System.err.println("unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        if (t.port == 0) {
            System.err.println("--port (the proxy's port) is required");
            System.exit(2);
        }
        System.out.println("proxy " + t.host + ":" + t.port + "; hosts A=" + t.masterA + " B=" + t.masterB
            + "; seed " + seed + "; Connector/J " + new org.mariadb.jdbc.Driver().getMajorVersion() + "."
            + new org.mariadb.jdbc.Driver().getMinorVersion());
        int passed = 0;
        List<String> failed = new ArrayList<>();
        for (boolean serverPrep : new boolean[] {true, false}) {
            t.serverPrep = serverPrep;
            t.rng = new Random(seed + (serverPrep ? 1 : 0));
            String mode = serverPrep ? "connectorj-server-prepared" : "connectorj-client-prepared";
            Object[][] checks = {
                {"connect", (Check) t::checkConnect},
                {"insert_by_hint_and_read_back", (Check) t::checkInsertByHintAndReadBack},
                {"ids_bound_as_parameters", (Check) t::checkIdsBoundAsParameters},
                {"for_update_read_modify_write", (Check) t::checkForUpdateReadModifyWrite},
                {"cross_shard_error_in_transaction", (Check) t::checkCrossShardErrorInTransaction},
                {"utf8_text_with_emoji", (Check) t::checkUtf8WithEmoji},
                {"commit_rollback_autocommit", (Check) t::checkCommitRollbackAutocommit},
            };
            for (Object[] check : checks) {
                String label = mode + " " + check[0];
                long start = System.nanoTime();
                try {
                    ((Check) check[1]).run();
                    passed++;
                    System.out.printf("ok   %s (%.2fs)%n", label, (System.nanoTime() - start) / 1e9);
                } catch (Exception | AssertionError e) {
                    String where = "";
                    for (StackTraceElement f : e.getStackTrace()) {
                        if (f.getClassName().equals(ConnectorJConformance.class.getName())
                            && f.getMethodName().startsWith("check")) {
                            where = " (at line " + f.getLineNumber() + " in " + f.getMethodName() + ")";
                            break;
                        }
                    }
                    System.out.println("FAIL " + label + ": " + e.getClass().getSimpleName() + ": "
                        + e.getMessage() + where);
                    failed.add(label);
                }
                System.out.flush();
            }
        }
        System.out.println();
        if (!failed.isEmpty()) {
            System.out.println("failed checks:");
            for (String f : failed) {
                System.out.println("  " + f);
            }
        }
        System.out.println(passed + " passed, " + failed.size() + " failed");
        System.exit(failed.isEmpty() ? 0 : 1);
    }
}
