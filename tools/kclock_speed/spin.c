// spin: a busy loop pinned to CPU argv[1] for argv[2] s
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <time.h>
int main(int c,char**v){cpu_set_t s;CPU_ZERO(&s);CPU_SET(atoi(v[1]),&s);sched_setaffinity(0,sizeof s,&s);
 time_t e=time(0)+atoi(v[2]); volatile unsigned long x=0; while(time(0)<e) for(int i=0;i<1000000;i++) x+=i; return 0;}
