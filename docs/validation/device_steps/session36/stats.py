"""Print the top of a cProfile dump: cumulative and own time."""
import pstats, sys
s = pstats.Stats(sys.argv[1])
s.sort_stats("cumulative").print_stats(60)
s.sort_stats("tottime").print_stats(30)
