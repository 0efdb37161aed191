# Shared by the bench scripts (sourced after they cd to the repository).

# bench_setup PACKAGE...: build them (release), set $target and $holdup, and
# make a scratch directory $work that is removed at exit.
bench_setup() {
	local p args=()
	for p in "$@"; do args+=(-p "$p"); done
	cargo build --release --quiet "${args[@]}"
	target=${CARGO_TARGET_DIR:-$(pwd)/target}
	holdup=$target/release/holdup
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
}

# The median of the numbers on stdin, in fixed point: awk's default (%.6g) writes the
# mean of an even count of large numbers as 5.52972e+07, which bc cannot read.
# Fixed point (awk's default %.6g would write 5.52972e+07, which bc cannot
# read), without decimals when it is whole.
median() { sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2
	printf (m == int(m) ? "%d\n" : "%.6f\n"), m}'; }

# "median [q1..q3]" of the numbers on stdin (quartiles by nearest rank).
quartiles() {
	sort -n | awk '{a[NR]=$1} END {m=(NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2
		printf "%s [%s..%s]", m, a[int((NR+3)/4)], a[int((3*NR+3)/4)]}'
}
