# the judge under cProfile on two bench candidates with 2-GB outputs (where the timing stage's seconds go)
set -u
D=build/steps/diag/s36
mkdir -p $OUT/prof
export XDG_CACHE_HOME=$PWD/build/xdg_s36 TRITON_CACHE_DIR=$PWD/build/triton_s36
for n in 42 64; do
  KP_PROF=$OUT/prof PYTHONPATH=$PWD/$D:${PYTHONPATH:-} timeout 35 kernelpro eval $D/p$n.py $D/c$n.py --device cuda --json -c $D/eval.yaml --workdir build/wd_prof_$n > $OUT/e_prof_$n.json 2> $OUT/e_prof_$n.err
  echo "eval $n rc=$?"
done
for f in $OUT/prof/judge-*.prof; do python3 $D/stats.py $f > ${f%.prof}.txt; done
