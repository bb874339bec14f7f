// pollute: walks a argv[3] MB buffer (one byte per cache line) pinned to CPU argv[1] for argv[2] s
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int c,char**v){cpu_set_t s;CPU_ZERO(&s);CPU_SET(atoi(v[1]),&s);sched_setaffinity(0,sizeof s,&s);
 size_t n=(size_t)atoi(v[3])<<20; char*b=malloc(n); time_t e=time(0)+atoi(v[2]);
 while(time(0)<e){ for(size_t i=0;i<n;i+=64) b[i]++; } return b[5]&1;}
