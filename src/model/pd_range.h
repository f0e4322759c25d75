#pragma once
// The bottleneck-free P/D range of PAPER.md §6 (paper §4.2), generalised to a storage NIC speed
// that differs from the compute NIC speed. With B the CNIC bandwidth per direction, S one SNIC's,
// s SNICs and g GPUs per node, M the node's half-duplex DRAM bandwidth, every SNIC saturated:
//   (1)  PE CNIC read   2sS/g <= B                                 (no P/D term)
//   (3)  PE CNIC write  (sS/g)(1 + D/P) <= B      =>  P/D >= sS / (gB - sS)
//   (5)  DE CNIC read   (sS/g)(P/D + 2) <= B      =>  P/D <= gB/(sS) - 2
//   (7)  DE CNIC write  (sS/g)(2P/D + 1) <= B     =>  P/D <= (gB/(sS) - 1) / 2
//   (8)  DE DRAM        (3 + 2P/D) sS <= M        =>  P/D <= (M/(sS) - 3) / 2
//        PE DRAM        2sS <= M                                   (no P/D term)
// With S = B these are the paper's s/(g-s) <= P/D <= min{(g-2s)/s, (g-s)/(2s), (M/Bs - 3)/2}.

#include <string>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::model {

struct PdRangeInput {
  int gpus_per_node = 8;             // g
  int snics_per_node = 1;            // s
  double snic_bytes_per_s = 50e9;    // S, one SNIC
  double cnic_bytes_per_s = 50e9;    // B, one CNIC per GPU, per direction
  double dram_bytes_per_s = 500e9;   // M, per node
};

struct PdConstraint {
  std::string name;     // "(3) PE CNIC write"
  std::string formula;  // "P/D >= sS/(gB - sS)"
  double bound = 0;     // the P/D bound it gives (lower or upper); NaN when it has no P/D term
  bool lower = false;   // a lower bound on P/D
  bool satisfiable = true;  // for the P/D-free ones: does the hardware meet it at all
  bool binds = false;       // it is the tightest bound on its side
};

struct PdRange {
  double pd_min = 0;
  double pd_max = 0;
  bool feasible = false;  // pd_min <= pd_max and every P/D-free constraint holds
  std::vector<PdConstraint> constraints;
};

Result<PdRange> bottleneck_free_range(const PdRangeInput& in);

// The simplest fraction p/q (q <= max_den) within `tol` of x, as "p/q" (or "p" when q = 1).
std::string as_fraction(double x, int max_den = 64, double tol = 1e-6);

}  // namespace dualpath::model
