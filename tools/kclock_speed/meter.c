// prints the median ns per dependent multiply-add over 0.13 ms windows, pinned to argv[1], for argv[2] s
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
static double w[200000];
int main(int c,char**v){cpu_set_t s;CPU_ZERO(&s);CPU_SET(atoi(v[1]),&s);sched_setaffinity(0,sizeof s,&s);
 double dur=atof(v[2])*1e9,t0=now(); uint64_t x=1; int n=0;
 while(now()-t0<dur && n<200000){double a=now(); for(int i=0;i<100000;i++)x=x*6364136223846793005ULL+1442695040888963407ULL; w[n++]=(now()-a)/100000.0;}
 qsort(w,n,sizeof(double),cmp); printf("%.4f %.4f %d %lu\n", w[n/2], w[n/10], n, x&1); }
