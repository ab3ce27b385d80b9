# Buckets the samples of `perf script -F comm,tid,ip,sym,dso` (call graphs
# recorded with --call-graph dwarf) by what the proxy was doing, and prints a
# table: category, samples, share. One sample = one stack, leaf first.
#
#   SQL parsing     any frame in sqlparser::
#   routing         any frame in shardgate::router:: (besides parsing)
#   socket write / socket read / epoll_wait / futex
#                   the syscall the sample sits in (nearest frame to the leaf)
#   malloc/free     allocator frames at the leaf, outside the above
#   prepared / binary protocol
#                   the rest whose nearest shardgate:: frame (leaf side) is in
#                   shardgate::protocol::binary:: or shardgate::engine::prepared::
#                   (COM_STMT_EXECUTE parsing, binding values as literals, text ->
#                   binary row conversion, with their memcpy; malloc/free at the
#                   leaf stay above); code they call in other shardgate modules
#                   (relay, framing) stays in "shardgate own"
#   shardgate own   the rest under shardgate:: (session loop, framing, relay, pool)
#   tokio           the rest under tokio:: (scheduler, timers, I/O driver)
#   other           everything else (kernel work with no user stack, ...)
function flush(   i, s, cat) {
  if (n == 0) return
  cat = ""
  for (i = 1; i <= n && cat == ""; i++) if (f[i] ~ /sqlparser::/) cat = "SQL parsing (sqlparser)"
  for (i = 1; i <= n && cat == ""; i++) if (f[i] ~ /shardgate::router::/) cat = "routing (shardgate::router, besides parsing)"
  for (i = 1; i <= n && cat == ""; i++) {
    s = f[i]
    if (s ~ /^(__send|__libc_send|sendto|__sendto|sendmsg|__libc_sendmsg|__libc_write|__GI___libc_write|__write|write|writev|__writev)$/ || s ~ /tcp_sendmsg|__x64_sys_(sendto|write|writev|sendmsg)/) cat = "socket write (send/write syscalls)"
    else if (s ~ /^(__recv|__libc_recv|recvfrom|__recvfrom|recvmsg|__libc_recvmsg|__libc_read|__GI___libc_read|__read|read|readv)$/ || s ~ /tcp_recvmsg|__x64_sys_(recvfrom|read|readv|recvmsg)/) cat = "socket read (recv/read syscalls)"
    else if (s ~ /epoll_wait/) cat = "epoll_wait (I/O driver polling and sleeping)"
    else if (s ~ /futex/ || s == "syscall" || s ~ /^__GI_syscall/) cat = "futex (thread park / unpark, wake-ups)"
    else if (s ~ /^(sched_yield|__sched_yield)$/) cat = "sched_yield"
  }
  if (cat == "" && f[1] ~ /^(_int_malloc|_int_free|malloc|__GI___libc_malloc|__libc_malloc|free|cfree|__GI___libc_free|__libc_free|realloc|_int_realloc|malloc_consolidate|unlink_chunk|tcache)/) cat = "malloc/free (outside parsing and routing)"
  for (i = 1; i <= n && cat == ""; i++) if (f[i] ~ /shardgate::/) {
    if (f[i] ~ /shardgate::(protocol::binary|engine::prepared)::/) cat = "prepared / binary protocol (execute, text->binary rows)"
    break
  }
  for (i = 1; i <= n && cat == ""; i++) if (f[i] ~ /shardgate::/) cat = "shardgate own code (session loop, framing, relay, pool)"
  for (i = 1; i <= n && cat == ""; i++) if (f[i] ~ /tokio::/) cat = "tokio runtime (scheduler, timers)"
  if (cat == "") cat = "other (kernel without user stack, libc, ...)"
  count[cat]++; total++
  leaf[cat SUBSEP f[1]]++
  n = 0
}
/^[^ \t]/ { flush(); next }          # sample header: "comm tid"
/^[ \t]*$/ { flush(); next }
{
  line = $0
  sub(/^[ \t]*[0-9a-f]+ /, "", line)  # ip
  sub(/ \([^()]*\)$/, "", line)       # (dso)
  sub(/\+0x[0-9a-f]+$/, "", line)
  f[++n] = line
}
END {
  flush()
  m = 0
  for (c in count) name[++m] = c
  for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (count[name[j]] > count[name[i]]) { t = name[i]; name[i] = name[j]; name[j] = t }
  printf "%-58s %8s %7s\n", "category", "samples", "share"
  for (i = 1; i <= m; i++) printf "%-58s %8d %6.1f%%\n", name[i], count[name[i]], 100 * count[name[i]] / total
  printf "%-58s %8d\n", "total", total
  # The leaf functions (where the CPU actually was) of the three largest categories.
  for (i = 1; i <= m && i <= 3; i++) {
    printf "\nleaf functions in \"%s\":\n", name[i]
    k = 0
    delete l
    for (key in leaf) { split(key, kk, SUBSEP); if (kk[1] == name[i]) l[++k] = kk[2] }
    for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++) if (leaf[name[i] SUBSEP l[b]] > leaf[name[i] SUBSEP l[a]]) { t = l[a]; l[a] = l[b]; l[b] = t }
    for (a = 1; a <= k && a <= 8; a++) printf "  %6.1f%%  %s\n", 100 * leaf[name[i] SUBSEP l[a]] / total, substr(l[a], 1, 100)
  }
}
